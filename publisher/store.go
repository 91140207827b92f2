package publisher

import (
	"errors"
	"time"
)

// Message is one queued publication.
type Message struct {
	Seq     uint64 // per-device sequence number, from 1, never reused
	Topic   string
	Payload []byte
	Time    time.Time // when it was enqueued
}

func (m Message) size() int64 { return int64(len(m.Topic) + len(m.Payload)) }

// Store is the queue behind a Publisher: messages in sequence order, oldest
// first. The Publisher serialises its calls; a Store need not be safe for
// concurrent use on its own.
type Store interface {
	// Append adds m at the back. m.Seq is above every Seq appended before.
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
	Close() error
}

// ErrClosed is returned by a Store used after Close.
var ErrClosed = errors.New("publisher: store closed")

// MemoryStore is a Store in memory: fast, and lost with the process.
// The zero value is an empty store.
type MemoryStore struct {
	q       []Message
	head    int
	bytes   int64
	lastSeq uint64
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
	if s.head > 1024 && s.head*2 > len(s.q) { // compact: keep memory proportional to the queue
		s.q = append([]Message(nil), s.q[s.head:]...)
		s.head = 0
	}
	return nil
}

func (s *MemoryStore) Len() (int, int64) { return len(s.q) - s.head, s.bytes }
func (s *MemoryStore) LastSeq() uint64   { return s.lastSeq }
func (s *MemoryStore) Close() error      { s.closed = true; return nil }
