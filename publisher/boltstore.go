package publisher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/publisher/internal/boltcheck"
)

var (
	queueBucket = []byte("queue")
	metaBucket  = []byte("meta")
	lastSeqKey  = []byte("last_seq")
	epochKey    = []byte("epoch")
	dirtyKey    = []byte("dirty") // present while a NoSync session has the store open
)

// ErrStoreInUse is wrapped by OpenBoltStore's error when another process
// (or another open in this one) holds the store: nothing was read, moved or
// changed.
var ErrStoreInUse = errors.New("publisher: store in use by another process")

var errLocked = ErrStoreInUse

// CorruptStoreError reports a damaged store that OpenBoltStore recovered
// from. It comes with a usable store. If MovedTo is set, the damaged file
// was renamed to MovedTo (never deleted). The store then starts with an
// empty queue and a new epoch. If MovedTo is empty, only one of the file's
// two meta pages was damaged. The store keeps what the other one describes,
// which may be one change older than the last. It starts a new epoch, since
// a sequence number may have been rolled back. It is a plain value, built
// by OpenBoltStore. The zero value is not meaningful. Once built it is safe
// to share.
type CorruptStoreError struct {
	Path, MovedTo string
	Err           error // what was wrong with the file
}

func (e *CorruptStoreError) Error() string {
	if e.MovedTo == "" {
		return fmt.Sprintf("publisher: store %s damaged (%v); kept the state its other meta page describes, with a new epoch", e.Path, e.Err)
	}
	return fmt.Sprintf("publisher: store %s damaged (%v); moved aside to %s, starting with an empty queue", e.Path, e.Err, e.MovedTo)
}

func (e *CorruptStoreError) Unwrap() error { return e.Err }

// BoltOptions configure a BoltStore: plain data, whose zero value is the
// safe default. OpenBoltStore takes a copy, so it is safe to share.
type BoltOptions struct {
	// NoSync skips the fsync after each change: many times faster, but a
	// power cut may lose the last messages (a process crash does not). A
	// store opened after a NoSync session that did not close cleanly starts
	// a new epoch, because a power cut may have rolled its sequence back.
	NoSync bool
	// LockTimeout is how long OpenBoltStore waits for another process to
	// release the store before failing with ErrStoreInUse (0: 1 s).
	LockTimeout time.Duration
	// Dir, when set, is the directory the store is in, held open (the
	// device's data directory). OpenBoltStore's path is then the store's
	// name within it. The file is opened (and moved aside) through it. No
	// link or rename of the directory's path can thus point it elsewhere.
	// OpenBoltStore does not close it.
	Dir *os.File
}

// ErrNotPrivate is wrapped by OpenBoltStore's error for a store file that
// is not the device's own. Such a file is another user's, a link, a FIFO or
// a device, or a file with more than one link. Nothing in it was read,
// changed or moved.
var ErrNotPrivate = datadir.ErrNotPrivate

// BoltStore is a durable Store in one go.etcd.io/bbolt file: it survives the
// process being killed and the device rebooting. Each Append and Remove is a
// transaction, fsynced unless NoSync. Like every Store it is not safe for
// concurrent use on its own (the Publisher serialises its calls). The zero
// value is not usable: use OpenBoltStore.
type BoltStore struct {
	db      *bolt.DB
	opts    BoltOptions
	epoch   string
	n       int
	bytes   int64
	lastSeq uint64
	closed  bool
}

// OpenBoltStore opens the store at path (with BoltOptions.Dir, a name in
// it), creating it if there is none. The store is the device's own regular
// file. It is opened through its directory, never through a link (see
// ErrNotPrivate). The file is checked, page by page, before bbolt reads it
// (see boltcheck.go). bbolt crashes the process on some damaged pages
// rather than failing. Its results:
//
//   - (s, nil): the store, with whatever its last run left queued.
//   - (s, *CorruptStoreError): the file was damaged; s is usable and the
//     error says what happened (moved aside to MovedTo and starting empty,
//     or kept with a new epoch). Report it and carry on.
//   - (nil, error wrapping ErrStoreInUse): another process holds the store
//     (a lock not released within LockTimeout). Nothing was changed.
//   - (nil, error wrapping ErrNotPrivate): the file is not the device's
//     own. Nothing was read, changed or moved.
//   - (nil, other error): invalid options, a path that cannot hold a store
//     (a directory, no permission) or a failure to read or write it.
//     Nothing was moved.
func OpenBoltStore(path string, opts BoltOptions) (*BoltStore, error) {
	if opts.LockTimeout < 0 {
		return nil, fmt.Errorf("%w: BoltOptions.LockTimeout must be >= 0, got %v", ErrInvalid, opts.LockTimeout)
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	dir, name := opts.Dir, path
	if dir == nil {
		d, base, err := datadir.OpenParent(path)
		if err != nil {
			return nil, fmt.Errorf("publisher: store %s: %w", path, err)
		}
		defer d.Close()
		dir, name = d, base
	}
	path = filepath.Join(dir.Name(), name)
	f, err := openLocked(dir, name, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("publisher: store %s is not a regular file", path)
	}
	fc, err := checkBoltFile(f, fi.Size())
	var dmg *boltcheck.DamageError
	switch {
	case err == nil:
		s, err := openBolt(f, path, opts, fc)
		if err != nil {
			return nil, err
		}
		if fc.metaFallback {
			return s, &CorruptStoreError{Path: path, Err: errors.New("one meta page invalid")}
		}
		return s, nil
	case !errors.As(err, &dmg):
		f.Close()
		return nil, fmt.Errorf("publisher: reading store %s: %w", path, err)
	}
	// Damaged. The lock on f is held until the file is renamed, so no other
	// process reads it meanwhile. A process that was waiting for it finds
	// the file moved and opens the new one (openLocked).
	movedName := fmt.Sprintf("%s.corrupt-%s", name, time.Now().UTC().Format("20060102T150405.000000000"))
	moved := filepath.Join(dir.Name(), movedName)
	rerr := datadir.Rename(dir, name, movedName)
	f.Close()
	if rerr != nil {
		return nil, fmt.Errorf("publisher: store %s damaged (%v) and could not be moved aside: %w", path, err, rerr)
	}
	nf, err2 := openLocked(dir, name, opts.LockTimeout)
	if err2 != nil {
		return nil, err2
	}
	s, err2 := openBolt(nf, path, opts, fileCheck{})
	if err2 != nil {
		return nil, err2
	}
	return s, &CorruptStoreError{Path: path, MovedTo: moved, Err: err}
}

// openLocked opens (or creates) name in dir, the device's own regular
// file (datadir.OpenFile), and takes its lock. A file moved aside while
// this process waited for its lock is let go, and the file now at name is
// opened instead.
func openLocked(dir *os.File, name string, timeout time.Duration) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	for attempt := 0; ; attempt++ {
		f, err := datadir.OpenFile(dir, name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("publisher: store: %w", err)
		}
		if err := lockFile(f, timeout); err != nil {
			f.Close()
			if errors.Is(err, errLocked) {
				return nil, fmt.Errorf("%w: %s (its lock was not released within %v)", ErrStoreInUse, path, timeout)
			}
			return nil, fmt.Errorf("publisher: locking store %s: %w", path, err)
		}
		if datadir.SameFile(dir, name, f) {
			return f, nil
		}
		f.Close()
		if attempt == 2 {
			return nil, fmt.Errorf("publisher: store %s keeps being replaced", path)
		}
	}
}

// openBolt hands bbolt the checked, locked file f and prepares the store:
// its buckets, its epoch, and the NoSync marker. bbolt closes f.
func openBolt(f *os.File, path string, opts BoltOptions, fc fileCheck) (s *BoltStore, err error) {
	defer func() { // not expected after the check: a crash here is a reboot loop
		if r := recover(); r != nil {
			err = fmt.Errorf("publisher: store %s: bbolt panicked: %v", path, r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: opts.NoSync, Timeout: opts.LockTimeout,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		return nil, fmt.Errorf("publisher: opening store %s: %w", path, err)
	}
	s = &BoltStore{db: db, opts: opts, n: fc.queued, bytes: fc.queuedBytes, lastSeq: fc.lastSeq}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(queueBucket); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		// A store from before epochs keeps the empty epoch: its sequence
		// never restarted, so receivers' state for it stays right.
		s.epoch = string(meta.Get(epochKey))
		if fc.metaFallback || fc.dirty || (s.epoch == "" && s.lastSeq == 0) {
			s.epoch = newEpoch()
			if err := meta.Put(epochKey, []byte(s.epoch)); err != nil {
				return err
			}
		}
		if opts.NoSync {
			return meta.Put(dirtyKey, []byte{1})
		}
		return meta.Delete(dirtyKey)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("publisher: preparing store %s: %w", path, err)
	}
	return s, nil
}

// Record layout: key = Seq (8 bytes, big-endian, so bbolt keeps them in
// order); value = time (8 bytes, Unix nanoseconds), topic length (2 bytes),
// topic, payload.
func encodeRecord(m Message) (key, val []byte) {
	key = binary.BigEndian.AppendUint64(nil, m.Seq)
	val = make([]byte, 0, 10+len(m.Topic)+len(m.Payload))
	val = binary.BigEndian.AppendUint64(val, uint64(m.Time.UnixNano()))
	val = binary.BigEndian.AppendUint16(val, uint16(len(m.Topic)))
	val = append(val, m.Topic...)
	return key, append(val, m.Payload...)
}

func decodeRecord(k, v []byte) (Message, error) {
	if len(k) != 8 || len(v) < 10 {
		return Message{}, errors.New("corrupt record")
	}
	tl := int(binary.BigEndian.Uint16(v[8:10]))
	if len(v) < 10+tl {
		return Message{}, errors.New("corrupt record: topic runs past the value")
	}
	return Message{
		Seq:     binary.BigEndian.Uint64(k),
		Time:    time.Unix(0, int64(binary.BigEndian.Uint64(v[:8]))),
		Topic:   string(v[10 : 10+tl]),
		Payload: append([]byte(nil), v[10+tl:]...),
	}, nil
}

// errBoltPanic wraps a panic bbolt raised in a store operation: not
// expected once the file passed the check, and a panic here would reboot the
// device into the same panic.
var errBoltPanic = errors.New("publisher: bbolt panicked")

func recoverBolt(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %v", errBoltPanic, r)
	}
}

// noSpaceError is an error bbolt flattened to text that says the disk is
// full. bbolt formats its "file resize error" and "file sync error" with %s
// when the file cannot grow. noSpaceError matches syscall.ENOSPC again, so
// that DropOldest can make room.
type noSpaceError struct{ err error }

func (e *noSpaceError) Error() string   { return e.err.Error() }
func (e *noSpaceError) Unwrap() []error { return []error{e.err, syscall.ENOSPC} }

// keepNoSpace restores ENOSPC to an error of bbolt's that lost it.
func keepNoSpace(err error) error {
	if err == nil || errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		return err
	}
	return &noSpaceError{err}
}

func (s *BoltStore) Append(m Message) (err error) {
	defer recoverBolt(&err)
	if s.closed {
		return ErrClosed
	}
	k, v := encodeRecord(m)
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(queueBucket).Put(k, v); err != nil {
			return err
		}
		return tx.Bucket(metaBucket).Put(lastSeqKey, k)
	})
	if err != nil {
		return keepNoSpace(err)
	}
	s.n++
	s.bytes += m.size()
	s.lastSeq = m.Seq
	return nil
}

func (s *BoltStore) Front() (m Message, ok bool, err error) {
	defer recoverBolt(&err)
	if s.closed {
		return Message{}, false, ErrClosed
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(queueBucket).Cursor().First()
		if k == nil {
			return nil
		}
		m, err = decodeRecord(k, v)
		ok = err == nil
		return err
	})
	return m, ok, err
}

func (s *BoltStore) Remove(seq uint64) (err error) {
	defer recoverBolt(&err)
	if s.closed {
		return ErrClosed
	}
	var removed int64 = -1
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(queueBucket)
		k := binary.BigEndian.AppendUint64(nil, seq)
		v := b.Get(k)
		if v == nil {
			return nil
		}
		m, err := decodeRecord(k, v)
		if err != nil {
			return err
		}
		removed = m.size()
		return b.Delete(k)
	})
	if err == nil && removed >= 0 {
		s.n--
		s.bytes -= removed
	}
	return keepNoSpace(err)
}

// removeOldest removes up to n messages from the front in one transaction:
// all or none.
func (s *BoltStore) removeOldest(n int) (seqs []uint64, err error) {
	defer recoverBolt(&err)
	if s.closed {
		return nil, ErrClosed
	}
	var removed int64
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(queueBucket)
		var keys [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(keys) < n; k, v = c.Next() {
			m, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			keys = append(keys, append([]byte(nil), k...))
			seqs = append(seqs, m.Seq)
			removed += m.size()
		}
		// Not while the cursor walks: a cursor that deletes skips the next key.
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, keepNoSpace(err)
	}
	s.n -= len(seqs)
	s.bytes -= removed
	return seqs, nil
}

func (s *BoltStore) Len() (int, int64) { return s.n, s.bytes }
func (s *BoltStore) LastSeq() uint64   { return s.lastSeq }
func (s *BoltStore) Epoch() string     { return s.epoch }

// Close closes the file; a NoSync store is synced first and marked as
// closed cleanly.
func (s *BoltStore) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.opts.NoSync {
		err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Delete(dirtyKey) })
		err = errors.Join(err, s.db.Sync())
	}
	return errors.Join(err, s.db.Close())
}
