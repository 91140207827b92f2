// Package eventq is the virtual engine's clock: a priority queue of events
// due at virtual times, earliest first. It is a 4-ary min-heap of small
// values: shallower than a binary heap, its children share cache lines, and
// it makes no interface call, so it pops millions of events a second.
package eventq

import "time"

// Event is something due for one device at a virtual time. Kind and Code
// are the engine's to interpret.
type Event struct {
	At   time.Duration // since the engine's epoch
	Key  uint32        // the tie-break between events due at one instant
	Dev  int32
	Kind uint8
	Code int16
}

// Before orders events by time, then Key, then device: a total order, so
// that a run with the same keys pops the same sequence.
func (e Event) Before(f Event) bool {
	if e.At != f.At {
		return e.At < f.At
	}
	if e.Key != f.Key {
		return e.Key < f.Key
	}
	return e.Dev < f.Dev
}

// Queue holds events, earliest first. The zero Queue is empty and ready;
// make one with capacity to size it once. It is not safe for concurrent
// use.
type Queue []Event

// Len is the number of events waiting.
func (q Queue) Len() int { return len(q) }

// Peek returns the earliest event without removing it; the queue must not
// be empty.
func (q Queue) Peek() Event { return q[0] }

// Push adds e.
func (q *Queue) Push(e Event) {
	*q = append(*q, e)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].Before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// Pop removes and returns the earliest event; the queue must not be empty.
func (q *Queue) Pop() Event {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		least := i
		for c := 4*i + 1; c <= 4*i+4 && c < len(h); c++ {
			if h[c].Before(h[least]) {
				least = c
			}
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*q = h
	return top
}
