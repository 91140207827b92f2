// Package faultlog keeps the attempts a fault.Breaker records, with
// their counts kept in step. They are appended in fixed-size blocks, so
// that a storm's millions are recorded without ever copying the ones
// before. A growing slice would copy them, under the lock every accept
// waits on.
package faultlog

import (
	"time"

	"github.com/herdguard/herdguard/fault"
)

const blockSize = 4096

// Log is an append-only list of attempts and their counts. It is not safe
// for concurrent use: its owner holds its own lock around every call. The
// zero Log is empty and ready.
type Log struct {
	base   int // Seq of the first attempt kept: Reset moves it on
	blocks [][]fault.Attempt
	n      int
	counts fault.Counts
}

// Accept opens a pending attempt that arrived at at and returns its Seq.
func (l *Log) Accept(at time.Time) int {
	if l.n%blockSize == 0 {
		l.blocks = append(l.blocks, make([]fault.Attempt, 0, blockSize))
	}
	seq := l.base + l.n
	last := len(l.blocks) - 1
	l.blocks[last] = append(l.blocks[last], fault.Attempt{Seq: seq, Accept: at})
	l.n++
	l.counts.Attempts++
	l.counts.Pending++
	return seq
}

// At returns attempt seq to amend in place, or nil if Reset forgot it.
func (l *Log) At(seq int) *fault.Attempt {
	i := seq - l.base
	if i < 0 || i >= l.n {
		return nil
	}
	return &l.blocks[i/blockSize][i%blockSize]
}

// Decide settles attempt seq's outcome at at, once: it reports false, and
// changes nothing, if the attempt was forgotten or already decided.
func (l *Log) Decide(seq int, o fault.Outcome, code byte, at time.Time) bool {
	a := l.At(seq)
	if a == nil || a.Outcome != fault.Pending || o == fault.Pending {
		return false
	}
	l.counts.Pending--
	*l.counts.Of(o)++
	a.Outcome, a.Code, a.Decided = o, code, at
	return true
}

// All returns a copy of every attempt since the last Reset, in order.
func (l *Log) All() []fault.Attempt {
	out := make([]fault.Attempt, 0, l.n)
	for _, b := range l.blocks {
		out = append(out, b...)
	}
	return out
}

// Counts returns the attempts by outcome since the last Reset.
func (l *Log) Counts() fault.Counts { return l.counts }

// Reset forgets every attempt; Seq goes on from where it was, and attempts
// still pending are settled unseen.
func (l *Log) Reset() {
	l.base += l.n
	l.blocks, l.n, l.counts = nil, 0, fault.Counts{}
}
