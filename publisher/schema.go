package publisher

import (
	"encoding/binary"
	"io"

	"github.com/herdguard/herdguard/publisher/internal/boltcheck"
)

// fileCheck is what checkBoltFile learned about a file that passed.
type fileCheck struct {
	// metaFallback: one of the two meta pages is invalid, so bbolt reads the
	// state the other one describes, which may be a transaction older than
	// the last one written.
	metaFallback bool
	lastSeq      uint64
	hasEpoch     bool
	dirty        bool // an unclean shutdown of a NoSync session
	queued       int
	queuedBytes  int64
}

// checkBoltFile reports whether the store file r (size bytes) is one that
// bbolt can open and this package can use without either of them reaching a
// malformed page. boltcheck reads bbolt's own pages. schema reads the
// store's buckets and records in them. An error that is not a
// *boltcheck.DamageError is a failure to read.
func checkBoltFile(r io.ReaderAt, size int64) (fileCheck, error) {
	var fc fileCheck
	st := &schema{fc: &fc}
	res, err := boltcheck.Check(r, size, st.visit)
	if err != nil {
		return fc, err
	}
	fc.metaFallback = res.MetaFallback
	return fc, st.done()
}

// schema checks the store's own layout as the walk meets it. The root holds
// the buckets "queue" and "meta" and nothing else. meta holds last_seq
// (8 bytes), epoch and dirty. queue holds records under 8-byte keys, none
// above last_seq.
type schema struct {
	fc            *fileCheck
	buckets       map[string]bool
	maxSeq        uint64
	epoch, seqKey bool
}

func (s *schema) visit(path []string, key, value []byte, bucket bool) error {
	switch {
	case len(path) == 0:
		name := string(key)
		if !bucket || (name != string(queueBucket) && name != string(metaBucket)) {
			return boltcheck.Damaged("unexpected root key %q", key)
		}
		if s.buckets == nil {
			s.buckets = map[string]bool{}
		}
		s.buckets[name] = true
		return nil
	case len(path) > 1 || bucket:
		return boltcheck.Damaged("unexpected bucket %q in %q", key, path)
	case path[0] == string(metaBucket):
		switch string(key) {
		case string(lastSeqKey):
			if len(value) != 8 {
				return boltcheck.Damaged("last_seq of %d bytes", len(value))
			}
			s.fc.lastSeq, s.seqKey = binary.BigEndian.Uint64(value), true
		case string(epochKey):
			if !validEpoch(string(value)) {
				return boltcheck.Damaged("epoch %q", value)
			}
			s.fc.hasEpoch = true
		case string(dirtyKey):
			s.fc.dirty = true
		default:
			return boltcheck.Damaged("unexpected meta key %q", key)
		}
		return nil
	default: // queue
		m, err := decodeRecord(key, value)
		if err != nil {
			return boltcheck.Damaged("%v", err)
		}
		s.maxSeq = max(s.maxSeq, m.Seq)
		s.fc.queued++
		s.fc.queuedBytes += m.size()
		return nil
	}
}

func (s *schema) done() error {
	switch {
	case len(s.buckets) == 0:
		return nil // bbolt wrote its first pages but the store never committed its buckets
	case len(s.buckets) == 1:
		return boltcheck.Damaged("only one of the queue and meta buckets")
	case s.fc.queued > 0 && !s.seqKey:
		return boltcheck.Damaged("messages queued without a last_seq")
	case s.maxSeq > s.fc.lastSeq:
		return boltcheck.Damaged("message %d above last_seq %d", s.maxSeq, s.fc.lastSeq)
	}
	return nil
}
