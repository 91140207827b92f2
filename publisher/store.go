package publisher

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// Message is one queued publication. The zero Message is not one the
// Publisher queues (Seq counts from 1). It is a plain value, safe to share;
// copies share Payload, which must not change once the message is queued.
type Message struct {
	Seq     uint64 // sequence number in the store's epoch, from 1, never reused in it
	Topic   string
	Payload []byte
	Time    time.Time // when it was enqueued
}

func (m Message) size() int64 { return int64(len(m.Topic) + len(m.Payload)) }

// Store is the queue behind a Publisher: messages in sequence order, oldest
// first. The Publisher serialises its calls; a Store need not be safe for
// concurrent use on its own. A nil Store in Config means a new MemoryStore.
type Store interface {
	// Append adds m at the back. m.Seq is above every Seq appended before.
	// A full disk is an error wrapping syscall.ENOSPC: under DropOldest the
	// Publisher then drops the oldest messages and tries again.
	Append(m Message) error
	// Front returns the oldest message; ok is false if the queue is empty.
	Front() (m Message, ok bool, err error)
	// Remove deletes the message with this Seq, if it is still queued.
	Remove(seq uint64) error
	// Len returns the number of messages queued and their topic+payload bytes.
	Len() (n int, bytes int64)
	// LastSeq returns the highest Seq ever appended (0 if none), even if
	// that message has since left the queue: sequence numbers survive restarts.
	LastSeq() uint64
	// Epoch names the store's sequence. It changes whenever the sequence
	// may restart or roll back: a new store, one moved aside or damaged, a
	// MemoryStore in each process. (epoch, seq) thus never names two
	// messages. It is at most 64 printable ASCII bytes. It is "" only for a
	// store written before epochs existed, whose sequence never restarted.
	Epoch() string
	Close() error
}

// newEpoch returns 64 random bits in hex: two epochs of one device never
// collide in practice (after a million restarts, a chance of about 3e-8).
func newEpoch() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms (Go 1.24+ crashes instead)
	return hex.EncodeToString(b[:])
}

// validEpoch reports whether e is a non-empty epoch of at most 64 printable
// ASCII bytes.
func validEpoch(e string) bool {
	if e == "" || len(e) > 64 {
		return false
	}
	for i := 0; i < len(e); i++ {
		if e[i] <= ' ' || e[i] > '~' {
			return false
		}
	}
	return true
}

// ErrClosed is returned by a Store used after Close.
var ErrClosed = errors.New("publisher: store closed")

// MemoryStore is a Store in memory: fast, and lost with the process, so
// each MemoryStore has an epoch of its own. The zero value is an empty store.
// Like every Store it is not safe for concurrent use on its own.
type MemoryStore struct {
	q       []Message
	head    int
	bytes   int64
	lastSeq uint64
	epoch   string
	closed  bool
}

func (s *MemoryStore) Append(m Message) error {
	if s.closed {
		return ErrClosed
	}
	s.q = append(s.q, m)
	s.bytes += m.size()
	s.lastSeq = m.Seq
	return nil
}

func (s *MemoryStore) Front() (Message, bool, error) {
	if s.closed {
		return Message{}, false, ErrClosed
	}
	if s.head == len(s.q) {
		return Message{}, false, nil
	}
	return s.q[s.head], true, nil
}

func (s *MemoryStore) Remove(seq uint64) error {
	if s.closed {
		return ErrClosed
	}
	for i := s.head; i < len(s.q); i++ {
		if s.q[i].Seq != seq {
			continue
		}
		s.bytes -= s.q[i].size()
		if i == s.head {
			s.q[i] = Message{}
			s.head++
		} else {
			s.q = append(s.q[:i], s.q[i+1:]...)
		}
		break
	}
	s.compact()
	return nil
}

// compact keeps the queue's memory proportional to what it holds. Removed
// slots at the front are reused. An array left large by a backlog that has
// drained is given back. A device thus settles to its baseline after an
// outage (a soak measures it).
func (s *MemoryStore) compact() {
	live := len(s.q) - s.head
	switch {
	case cap(s.q) > minQueueCap && live*4 < cap(s.q):
		s.q = append(make([]Message, 0, max(minQueueCap, 2*live)), s.q[s.head:]...)
		s.head = 0
	case live == 0:
		s.q, s.head = s.q[:0], 0
	case s.head*2 >= len(s.q) && s.head >= minQueueCap: // mostly removed slots: move the rest down
		n := copy(s.q, s.q[s.head:])
		clear(s.q[n:])
		s.q, s.head = s.q[:n], 0
	}
}

// minQueueCap is the array a MemoryStore keeps whatever drains.
const minQueueCap = 16

func (s *MemoryStore) Len() (int, int64) { return len(s.q) - s.head, s.bytes }
func (s *MemoryStore) LastSeq() uint64   { return s.lastSeq }

// Epoch is drawn at random the first time it is asked for.
func (s *MemoryStore) Epoch() string {
	if s.epoch == "" {
		s.epoch = newEpoch()
	}
	return s.epoch
}
func (s *MemoryStore) Close() error { s.closed = true; return nil }
