package publisher_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdguard/herdguard/publisher"
)

// FuzzDecodeEnvelope: any bytes a receiver gets decode to an envelope that
// round-trips, or to an error wrapping ErrNotEnvelope. Never a panic.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"epoch":"5f3ab2c0d1e4f607","seq":42,"time":"2026-11-21T10:00:00.123Z","payload":"AAEC"}`,
		`{"seq":1,"time":"2026-11-21T10:00:00Z","payload":null}`, // from before epochs
		`{"epoch":"","seq":0}`, `{"epoch":"a b","seq":1}`, `{"seq":18446744073709551615}`, `[]`, `null`, `{"seq":-1}`,
		`{"epoch":"\u00e9","seq":3}`, `{"seq":1,"payload":"not base64"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := publisher.DecodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, publisher.ErrNotEnvelope) {
				t.Fatalf("%q: %v does not wrap ErrNotEnvelope", b, err)
			}
			return
		}
		if e.Seq == 0 || len(e.Epoch) > 64 {
			t.Fatalf("%q decoded to %+v", b, e)
		}
		again, err := e.Marshal()
		if err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		e2, err := publisher.DecodeEnvelope(again)
		if err != nil {
			t.Fatalf("%q re-encoded as %q: %v", b, again, err)
		}
		if e2.Epoch != e.Epoch || e2.Seq != e.Seq || !e2.Time.Equal(e.Time) || !bytes.Equal(e2.Payload, e.Payload) {
			t.Fatalf("round trip of %q: %+v != %+v", b, e2, e)
		}
	})
}

// seedStore is a small store file: n messages, the first quarter
// delivered, cut after its last used page (bbolt grows files ahead of use).
// Small, because the fuzzer minimises every new input it keeps, running the
// target once per byte it tries to remove.
func seedStore(f *testing.F, n uint64) []byte {
	path := filepath.Join(f.TempDir(), "seed.db")
	s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	for i := uint64(1); i <= n; i++ {
		m := publisher.Message{Seq: i, Topic: "t/x", Payload: bytes.Repeat([]byte{byte(i)}, int(i)*4), Time: time.Unix(0, int64(i))}
		if err := s.Append(m); err != nil {
			f.Fatal(err)
		}
	}
	for i := uint64(1); i <= n/4; i++ {
		if err := s.Remove(i); err != nil {
			f.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	img, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	var hwm uint64 // the higher of the two meta pages' high water marks
	for _, off := range []int{0, damagePage} {
		hwm = max(hwm, binary.NativeEndian.Uint64(img[off+16+40:]))
	}
	return img[:hwm*damagePage]
}

// openAndUse opens img as a store file and works it: it must not crash or
// hang whatever img holds, and a file moved aside must be img byte for byte.
func openAndUse(t *testing.T, img []byte) {
	path := filepath.Join(fastTempDir(t), "q.db")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openBounded(t, path)
	var ce *publisher.CorruptStoreError
	switch {
	case errors.As(err, &ce) && ce.MovedTo != "":
		kept, rerr := os.ReadFile(ce.MovedTo)
		if rerr != nil || !bytes.Equal(kept, img) {
			t.Fatalf("the damaged file was not kept as it was (%v)", rerr)
		}
	case err != nil && ce == nil:
		t.Fatalf("OpenBoltStore: %v", err)
	}
	for i := 0; i < 100; i++ { // Front and Remove through (part of) the queue
		m, ok, err := s.Front()
		if err != nil {
			t.Fatalf("Front: %v", err)
		}
		if !ok {
			break
		}
		if err := s.Remove(m.Seq); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if err := s.Append(publisher.Message{Seq: s.LastSeq() + 1, Topic: "t"}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// fastTempDir is a temporary directory in memory where there is one
// (/dev/shm): bbolt fsyncs a new file, and on a disk that costs milliseconds
// per run, which the fuzzer's minimisation multiplies by thousands.
func fastTempDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "herdguard-fuzz-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// FuzzStorePageDamage damages the seed store, a real one of a few pages:
// data written at page*4096+offset, then the file cut to its first cut
// pages (0: not cut). Damage that leaves most of the file intact tries the
// check deep inside pages it otherwise accepts; the input stays small, so
// the fuzzer's minimisation stays quick. Whatever the damage: no crash, no
// hang, a moved-aside file kept byte for byte, and a store that works.
func FuzzStorePageDamage(f *testing.F) {
	img := seedStore(f, 40) // a branch page, leaves, sub-buckets, freelist pages
	pages := len(img) / damagePage
	for p := 0; p < pages; p++ {
		f.Add(uint8(p), uint16(0), []byte{0xff, 0xff, 0xff, 0xff}, uint8(0))
		f.Add(uint8(p), uint16(16), []byte{0x7f, 0, 0, 0}, uint8(0))
		f.Add(uint8(0), uint16(0), []byte(nil), uint8(p))
	}
	f.Fuzz(func(t *testing.T, page uint8, offset uint16, data []byte, cut uint8) {
		off := int(page)%pages*damagePage + int(offset)%damagePage
		bad := append([]byte(nil), img...)
		copy(bad[off:], data)
		if cut > 0 {
			bad = bad[:min(len(bad), int(cut)*damagePage)]
		}
		openAndUse(t, bad)
	})
}
