package observer

import (
	"slices"

	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/testbroker"
)

// Received counts the messages a broker received by the envelope's rule
// (package publisher): per device and epoch, a sequence number seen before
// is a duplicate. It keeps the sequence numbers as intervals, so its
// memory grows with gaps and epochs, not with messages (a soak sends
// millions). Its zero value is not usable: use NewReceived. It is not safe
// for concurrent use.
type Received struct {
	seen map[receiverKey]*seqSet
	// Unique and Duplicates count the messages taken so far; Undecodable,
	// those whose payload is no envelope.
	Unique, Duplicates, Undecodable int64
}

type receiverKey struct{ clientID, epoch string }

// NewReceived returns a count of nothing received yet.
func NewReceived() *Received { return &Received{seen: map[receiverKey]*seqSet{}} }

// Take counts publishes.
func (r *Received) Take(ps []testbroker.Publish) {
	for _, p := range ps {
		e, err := publisher.DecodeEnvelope(p.Payload)
		if err != nil {
			r.Undecodable++
			continue
		}
		k := receiverKey{p.ClientID, e.Epoch}
		s := r.seen[k]
		if s == nil {
			s = &seqSet{}
			r.seen[k] = s
		}
		if s.add(e.Seq) {
			r.Unique++
		} else {
			r.Duplicates++
		}
	}
}

// seqSet is a set of sequence numbers as sorted, disjoint, non-adjacent
// closed intervals.
type seqSet struct{ iv [][2]uint64 }

// add inserts seq and reports whether it was new. Messages arrive mostly in
// order, which extends the last interval in O(1).
func (s *seqSet) add(seq uint64) bool {
	n := len(s.iv)
	if n > 0 && seq == s.iv[n-1][1]+1 {
		s.iv[n-1][1] = seq
		return true
	}
	i, found := slices.BinarySearchFunc(s.iv, seq, func(iv [2]uint64, seq uint64) int {
		switch {
		case iv[1] < seq:
			return -1
		case iv[0] > seq:
			return 1
		}
		return 0
	})
	if found {
		return false
	}
	// seq falls between s.iv[i-1] and s.iv[i]: join either or both.
	joinLeft := i > 0 && s.iv[i-1][1]+1 == seq
	joinRight := i < len(s.iv) && s.iv[i][0] == seq+1
	switch {
	case joinLeft && joinRight:
		s.iv[i-1][1] = s.iv[i][1]
		s.iv = slices.Delete(s.iv, i, i+1)
	case joinLeft:
		s.iv[i-1][1] = seq
	case joinRight:
		s.iv[i][0] = seq
	default:
		s.iv = slices.Insert(s.iv, i, [2]uint64{seq, seq})
	}
	return true
}
