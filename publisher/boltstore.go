package publisher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	queueBucket = []byte("queue")
	metaBucket  = []byte("meta")
	lastSeqKey  = []byte("last_seq")
)

// CorruptStoreError reports a store file that could not be used. The file was
// moved aside to MovedTo, not deleted, and the store starts empty.
type CorruptStoreError struct {
	Path, MovedTo string
	Err           error
}

func (e *CorruptStoreError) Error() string {
	return fmt.Sprintf("publisher: store %s unusable (%v); moved aside to %s, starting with an empty queue", e.Path, e.Err, e.MovedTo)
}

func (e *CorruptStoreError) Unwrap() error { return e.Err }

// BoltOptions configure a BoltStore.
type BoltOptions struct {
	// NoSync skips the fsync after each change: many times faster, but a
	// power cut may lose the last messages (a process crash does not).
	NoSync bool
}

// BoltStore is a durable Store in one go.etcd.io/bbolt file: it survives the
// process being killed and the device rebooting. Each Append and Remove is a
// transaction, fsynced unless NoSync.
type BoltStore struct {
	db      *bolt.DB
	n       int
	bytes   int64
	lastSeq uint64
}

// OpenBoltStore opens (or creates) the store at path. If the file exists but
// is not a usable store, it is renamed to path.corrupt-<time> and a fresh
// store is created: the returned store is usable and the error is a
// *CorruptStoreError saying where the old file went.
func OpenBoltStore(path string, opts BoltOptions) (*BoltStore, error) {
	s, err := openBolt(path, opts)
	if err == nil {
		return s, nil
	}
	if fi, statErr := os.Stat(path); statErr != nil || !fi.Mode().IsRegular() {
		return nil, err // no file there to move aside: a real error (permissions, a directory)
	}
	moved := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405.000000000"))
	if rerr := os.Rename(path, moved); rerr != nil {
		return nil, fmt.Errorf("publisher: store %s unusable (%v) and could not be moved aside: %w", path, err, rerr)
	}
	s, err2 := openBolt(path, opts)
	if err2 != nil {
		return nil, err2
	}
	return s, &CorruptStoreError{Path: path, MovedTo: moved, Err: err}
}

func openBolt(path string, opts BoltOptions) (s *BoltStore, err error) {
	defer func() { // bbolt panics on some corrupt pages rather than failing
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt store: %v", r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: opts.NoSync})
	if err != nil {
		return nil, err
	}
	s = &BoltStore{db: db}
	err = db.Update(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			return e
		}
		q, err := tx.CreateBucketIfNotExists(queueBucket)
		if err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if v := meta.Get(lastSeqKey); v != nil {
			if len(v) != 8 {
				return errors.New("corrupt last_seq")
			}
			s.lastSeq = binary.BigEndian.Uint64(v)
		}
		return q.ForEach(func(k, v []byte) error {
			m, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			s.n++
			s.bytes += m.size()
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, err
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

func (s *BoltStore) Append(m Message) error {
	k, v := encodeRecord(m)
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(queueBucket).Put(k, v); err != nil {
			return err
		}
		return tx.Bucket(metaBucket).Put(lastSeqKey, k)
	})
	if err != nil {
		return err
	}
	s.n++
	s.bytes += m.size()
	s.lastSeq = m.Seq
	return nil
}

func (s *BoltStore) Front() (m Message, ok bool, err error) {
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

func (s *BoltStore) Remove(seq uint64) error {
	var removed int64 = -1
	err := s.db.Update(func(tx *bolt.Tx) error {
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
	return err
}

func (s *BoltStore) Len() (int, int64) { return s.n, s.bytes }
func (s *BoltStore) LastSeq() uint64   { return s.lastSeq }
func (s *BoltStore) Close() error      { return s.db.Close() }
