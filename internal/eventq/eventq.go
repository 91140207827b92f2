// Package eventq is the virtual engine's clock: a priority queue of events
// due at virtual times, earliest first.
//
// It is a calendar queue, as discrete-event simulators of large
// populations use. A ring of buckets 17 ms wide covers the next 69
// seconds. Each bucket is an unsorted slice until its turn comes. Then it
// is sorted once and read in order. If the driver asks, a crowded bucket
// is sorted on another core while the one before it is read. Events
// further ahead wait, unsorted, in eras of half the ring's length until
// the ring reaches them. A push is an append, and a pop is a read of the
// next element. A heap of a million events costs ten levels of cache
// misses each way. A fleet idle at its cap for an hour costs only the
// buckets it skips, 64 to a word of a bitmap. Events pop in exactly the
// order Before defines. A run's sequence is thus the same as any other
// priority queue's.
package eventq

import (
	"cmp"
	"math/bits"
	"slices"
	"time"

	"github.com/herdguard/herdguard/internal/hugepage"
)

// Event is something due for one device at a virtual time. What it is, is
// the engine's to interpret.
type Event struct {
	At   time.Duration // since the engine's epoch
	Key  uint32        // the tie-break between events due at one instant
	Dev  int32
	What What
}

// What is what an event is, for the engine: a kind and a code. It is a
// field of its own so that an Event has four, which the compiler keeps in
// registers: with five, every push and pop went through memory.
type What struct {
	Kind uint8
	Code int16
}

// Before orders events by time, then Key, then device, then kind and code.
// The order is total, so a run with the same keys pops the same sequence
// from any queue.
func (e Event) Before(f Event) bool {
	switch {
	case e.At != f.At:
		return e.At < f.At
	case e.Key != f.Key:
		return e.Key < f.Key
	case e.Dev != f.Dev:
		return e.Dev < f.Dev
	case e.What.Kind != f.What.Kind:
		return e.What.Kind < f.What.Kind
	}
	return e.What.Code < f.What.Code
}

func compare(e, f Event) int {
	switch {
	case e.At != f.At:
		return cmp.Compare(e.At, f.At)
	case e.Key != f.Key:
		return cmp.Compare(e.Key, f.Key)
	case e.Dev != f.Dev:
		return cmp.Compare(e.Dev, f.Dev)
	case e.What.Kind != f.What.Kind:
		return cmp.Compare(e.What.Kind, f.What.Kind)
	}
	return cmp.Compare(e.What.Code, f.What.Code)
}

const (
	// a bucket spans 2^24 ns, about 17 ms: a million-device storm puts
	// hundreds in each, and the buckets being filled share few enough
	// cache lines to stay in cache. Of 4, 8 and 17 ms buckets, these run
	// BenchmarkMillionThrottledRestart (internal/virtual) fastest.
	spanBits = 24
	span     = 1 << spanBits
	ringBits = 12 // 4,096 buckets: 68.7 s ahead, past a 32 s cap's every wait
	ring     = 1 << ringBits
)

// Queue holds events, earliest first. The zero Queue is empty and ready. It
// is not safe for concurrent use.
type Queue struct {
	// SortAhead sorts the next crowded bucket on a goroutine of its own
	// while the driver reads the one before it. A driver with a core to
	// spare gains the sort's time. Events pop in the same order either
	// way. A Queue dropped with a sort running leaves it to end on its own.
	SortAhead bool
	ring      []bucket      // by index: the buckets ahead; the current one's events are in now
	free      []*chunk      // the buckets' storage not in use
	occ       []uint64      // a bit for each ring bucket holding events or being sorted ahead
	cur       int           // the current bucket
	start     time.Duration // its first instant
	now       []Event       // its events, sorted from head on
	head      int
	far       []farEra // events beyond the ring, by era, earliest first, until it reaches them
	n         int
	sorter    sorter     // the driver's own
	late      []Event    // a bucket sorted ahead: the events that came after its sort began
	ahead     *sortAhead // nil until a sort ahead is first made
	made      int        // chunks made
	// sortedAhead counts the buckets loaded from a sort ahead, for the
	// tests that it happens
	sortedAhead int
}

// A bucket of the ring is a list of chunks. Its storage grows and shrinks
// 1 KiB at a time, shared by all the buckets. The queue thus holds about
// its events and no more, whichever buckets they crowd into.
type bucket struct {
	first, last *chunk // nil: the bucket is empty
	fill        int32  // events in the last chunk
	n           int32  // events in all
}

const (
	chunkLen = 42   // events a chunk: with its link, 1 KiB
	slabLen  = 4096 // chunks made at most at a time: 4 MiB, two huge pages
)

type chunk struct {
	ev   [chunkLen]Event
	next *chunk
}

// Len is the number of events waiting.
func (q *Queue) Len() int { return q.n }

// Push adds e.
func (q *Queue) Push(e Event) {
	if q.ring == nil {
		q.ring, q.occ = make([]bucket, ring), make([]uint64, ring/64)
	}
	q.n++
	switch {
	case e.At < q.start+span: // the current bucket's turn (or the past): in order
		i, _ := slices.BinarySearchFunc(q.now[q.head:], e, compare)
		q.now = slices.Insert(q.now, q.head+i, e)
	case e.At < q.start+ring*span:
		q.add(e)
	default:
		q.farther(e)
	}
}

// add puts e in its bucket of the ring, other than the current one.
func (q *Queue) add(e Event) {
	i := index(e.At)
	if q.put(&q.ring[i], e) {
		q.occ[i/64] |= 1 << (i % 64)
	}
}

// put appends e to b, and reports whether b was empty.
func (q *Queue) put(b *bucket, e Event) (first bool) {
	switch {
	case b.first == nil:
		b.first = q.chunk()
		b.last, b.fill, first = b.first, 0, true
	case b.fill == chunkLen:
		c := q.chunk()
		b.last.next, b.last, b.fill = c, c, 0
	}
	b.last.ev[b.fill] = e
	b.fill++
	b.n++
	return first
}

// An era is half the ring's length of time. Events beyond the ring wait
// in their era's list, unsorted as a bucket's are. They enter the ring
// all at once when its first instant reaches the era before theirs. Every
// one of them then falls within the ring, and none is due yet. A fleet
// booting over half an hour puts a million events there. A heap would
// take ten levels of cache misses to pop each of them.
const eraBits = spanBits + ringBits - 1

func era(at time.Duration) int64 { return int64(at >> eraBits) }

// entry is when era e enters the ring: when the ring's first instant
// reaches the era before it.
func entry(e int64) time.Duration { return time.Duration(e-1) << eraBits }

// farEra is an era's events beyond the ring.
type farEra struct {
	era int64
	bucket
}

// farther puts e, beyond the ring, in its era.
func (q *Queue) farther(e Event) {
	k := era(e.At)
	i, found := slices.BinarySearchFunc(q.far, k, func(f farEra, k int64) int { return cmp.Compare(f.era, k) })
	if !found {
		q.far = slices.Insert(q.far, i, farEra{era: k})
	}
	q.put(&q.far[i].bucket, e)
}

// enter moves the earliest era's events into the ring, whose first
// instant has reached its entry.
func (q *Queue) enter() {
	b := q.far[0].bucket
	q.far = q.far[1:]
	for c := b.first; c != nil; {
		for _, e := range c.ev[:b.filled(c)] {
			q.add(e)
		}
		next := c.next
		q.free = append(q.free, c)
		c = next
	}
}

// chunk returns an empty chunk.
func (q *Queue) chunk() *chunk {
	// chunks come in slabs: as many as are out, up to 4 MiB at a time, on huge pages
	if len(q.free) == 0 {
		slab := hugepage.Make[chunk](min(max(q.made, 64), slabLen))
		q.made += len(slab)
		for i := range slab {
			q.free = append(q.free, &slab[i])
		}
	}
	c := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	c.next = nil
	return c
}

// Peek returns the earliest event without removing it; the queue must not
// be empty.
func (q *Queue) Peek() Event {
	q.settle()
	return q.now[q.head]
}

// Pop removes and returns the earliest event; the queue must not be empty.
func (q *Queue) Pop() Event {
	q.settle()
	e := q.now[q.head]
	q.head++
	q.n--
	return e
}

// settle makes the current bucket the one holding the earliest event,
// unless the queue is empty.
func (q *Queue) settle() {
	for q.n > 0 && q.head == len(q.now) {
		q.now, q.head = q.now[:0], 0
		next, ok := q.next()
		at := q.start + time.Duration((next-q.cur)&(ring-1))*span // when bucket next begins
		if len(q.far) > 0 && (!ok || entry(q.far[0].era) <= at) { // an era enters first
			q.start = entry(q.far[0].era)
			q.cur = index(q.start)
			q.enter()
			if q.occ[q.cur/64]&(1<<(q.cur%64)) == 0 {
				// its events come later: the next bucket holding some is theirs or
				// the ring's
				continue
			}
		} else {
			q.start, q.cur = at, next
		}
		q.load(q.cur)
	}
}

// load makes bucket i's events now, in order, sorting them unless they
// were sorted ahead, and starts the sort of the next crowded bucket.
func (q *Queue) load(i int) {
	if a := q.ahead; a != nil && a.busy && a.bucket == i {
		<-a.done
		a.busy = false
		q.recycle(&a.sorter)
		q.sortedAhead++
		if q.ring[i].first == nil { // nothing came after its sort began
			q.now, a.out = a.out, q.now[:0]
		} else {
			late := q.sortHere(q.late, i)
			q.now, q.late = merge(q.now[:0], a.out, late), late[:0]
		}
	} else {
		q.now = q.sortHere(q.now, i)
	}
	q.occ[i/64] &^= 1 << (i % 64)
	q.sortNext()
}

// sortHere sorts bucket i's events in the ring on the driver's goroutine,
// into dst's storage, and frees their chunks.
func (q *Queue) sortHere(dst []Event, i int) []Event {
	dst = q.sorter.sort(dst, q.detach(i), q.start)
	q.recycle(&q.sorter)
	return dst
}

// aheadMin is the fewest events in a bucket worth sorting on another
// goroutine: enough that the hand-over is small beside the sort. A value
// of 1,024 made no difference to the million-device throttled restart.
const aheadMin = 4096

// sortAhead is a bucket being sorted on a goroutine of its own, and the
// buffers that sort uses, kept for the next.
type sortAhead struct {
	sorter
	out    []Event // the bucket's events, in order, once done
	done   chan struct{}
	bucket int  // which bucket: the driver's alone, as busy is
	busy   bool // a sort has begun and not been taken
}

// sortNext starts the sort of the next bucket holding events, if the
// Queue sorts ahead, that bucket is crowded and no sort is running. Its
// events leave the ring; any pushed to it after are merged in when it
// is loaded.
func (q *Queue) sortNext() {
	if !q.SortAhead || q.ahead != nil && q.ahead.busy {
		return
	}
	j, ok := q.next()
	if !ok || q.ring[j].n < aheadMin {
		return
	}
	if q.ahead == nil {
		q.ahead = &sortAhead{done: make(chan struct{}, 1)}
	}
	a := q.ahead
	a.bucket, a.busy = j, true
	b, start := q.detach(j), q.start+time.Duration((j-q.cur)&(ring-1))*span
	go func() {
		a.out = a.sort(a.out, b, start)
		a.done <- struct{}{}
	}()
}

// detach takes bucket i's events out of the ring, leaving its bit in occ.
func (q *Queue) detach(i int) bucket {
	b := q.ring[i]
	q.ring[i] = bucket{}
	return b
}

// recycle frees the chunks s has sorted.
func (q *Queue) recycle(s *sorter) {
	q.free = append(q.free, s.chunks...)
	clear(s.chunks) // the free list holds them now
	s.chunks = s.chunks[:0]
}

// merge appends a and b, each in order, to dst in order.
func merge(dst, a, b []Event) []Event {
	for len(a) > 0 && len(b) > 0 {
		if compare(b[0], a[0]) < 0 {
			dst, b = append(dst, b[0]), b[1:]
		} else {
			dst, a = append(dst, a[0]), a[1:]
		}
	}
	return append(append(dst, a...), b...)
}

// sorter sorts a bucket's events: the buffers a sort uses, kept for the
// next, and the chunks of the bucket it last sorted, to be freed.
type sorter struct {
	chunks   []*chunk // the bucket's, in order
	keys     []uint64
	keySpare []uint64 // sortKeys's: the keys are spread into it, and the two swap
	count    []int32  // sortKeys's: where each digit's keys end
	inner    []int32  // sortKeys's: the same within a digit, by the next one
}

// sort returns bucket b's events (its first instant start) in order, in
// dst's storage. Events in a bucket differ in At by less than a span, so
// each one's order is mostly one uint64. That key holds the bits of its
// time in which the bucket's events differ, as many bits of its Key as
// fit, and its place in the bucket. Sorting those is a sort of integers,
// with no call per comparison. The events are then read from the chunks
// in that order. The few alike in time and those bits are put in order by
// compare among themselves. A fleet without jitter puts thousands at one
// instant. Their keys are then nearly all Key, and few are alike.
func (s *sorter) sort(dst []Event, b bucket, start time.Duration) []Event {
	now, chunks, keys := dst[:0], s.chunks[:0], s.keys[:0]
	all, some := uint64(span-1), uint64(0) // the bits every event's time has, and any has
	for c := b.first; c != nil; c = c.next {
		for _, e := range c.ev[:b.filled(c)] {
			all &= uint64(e.At - start)
			some |= uint64(e.At - start)
		}
		chunks = append(chunks, c)
	}
	l := layout(all^some, int(b.n))
	for _, c := range chunks {
		for _, e := range c.ev[:b.filled(c)] {
			keys = append(keys, l.key(e, start, len(keys)))
		}
	}
	keys = s.sortKeys(keys)
	for _, k := range keys {
		p := k & l.placeMask
		now = append(now, chunks[p/chunkLen].ev[p%chunkLen])
	}
	for i := 0; i < len(keys); { // events alike in the key's bits
		j := i + 1
		for j < len(keys) && keys[j]>>l.placeBits == keys[i]>>l.placeBits {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(now[i:j], compare)
		}
		i = j
	}
	s.chunks, s.keys = chunks, keys
	return now
}

// filled is how many events chunk c of b holds.
func (b bucket) filled(c *chunk) int {
	if c == b.last {
		return int(b.fill)
	}
	return chunkLen
}

// keyLayout is where a bucket's sort keys put an event's time, Key and
// place. Its time's bits come first, from the highest in which the
// bucket's events differ. The top keyBits of its Key follow, then
// placeBits for its place.
type keyLayout struct {
	timeMask            uint64
	keyBits, placeBits  int
	keyShift, placeMask uint64
}

// layout is the key layout of n events whose times in the bucket differ
// in the bits of differ.
func layout(differ uint64, n int) keyLayout {
	timeBits, placeBits := bits.Len64(differ), bits.Len(uint(n)) // n < 2^31: the three fit
	keyBits := min(32, 64-timeBits-placeBits)
	return keyLayout{timeMask: 1<<timeBits - 1, keyBits: keyBits, placeBits: placeBits,
		keyShift: uint64(keyBits + placeBits), placeMask: 1<<placeBits - 1}
}

// key is e's sort key at place p. The bits above the differing ones are
// alike in every event, and left out.
func (l keyLayout) key(e Event, start time.Duration, p int) uint64 {
	return uint64(e.At-start)&l.timeMask<<l.keyShift | uint64(e.Key)>>(32-l.keyBits)<<l.placeBits | uint64(p)
}

// radixMin is how many keys a counting pass must have to beat a comparison
// sort of them all. The counting pass goes by a digit of their key (the
// first bits in which they differ), then sorts each digit's few. The digit
// has enough values for about four keys each, at most 2^radixBits. A
// hundred million devices put a million and more in a bucket. The keys of
// each top digit are then many, and are spread by the next digit in turn.
const (
	radixMin  = 64
	radixBits = 11
)

// sortKeys sorts keys, returning them in s.keys's storage or its spare.
func (s *sorter) sortKeys(keys []uint64) []uint64 {
	if len(keys) < radixMin {
		slices.Sort(keys)
		return keys
	}
	out := slices.Grow(s.keySpare[:0], len(keys))[:len(keys)]
	s.count = spreadKeys(keys, out, commonBits(keys), s.count)
	lo := int32(0)
	for _, hi := range s.count {
		switch run := out[lo:hi]; {
		// spread back into keys by the next digit, sorted there, and copied
		case len(run) >= radixMin:
			s.inner = spreadKeys(run, keys[lo:hi], commonBits(run), s.inner)
			sub := int32(0)
			for _, end := range s.inner {
				slices.Sort(keys[lo+sub : lo+end])
				sub = end
			}
			copy(run, keys[lo:hi])
		case len(run) > 1:
			slices.Sort(run)
		}
		lo = hi
	}
	s.keySpare = keys
	return out
}

// digitBits is the digit n keys are spread by: two to four keys a value,
// or more past 2^radixBits values.
func digitBits(n int) int { return min(bits.Len(uint(n))-2, radixBits) }

// commonBits is how many top bits keys all share. A fleet without jitter
// puts thousands at one instant, alike in every bit of their time.
// Spreading them by those bits would spread nothing.
func commonBits(keys []uint64) int {
	all, some := ^uint64(0), uint64(0)
	for _, k := range keys {
		all &= k
		some |= k
	}
	return bits.LeadingZeros64(all ^ some)
}

// spreadKeys writes keys to out (as long) in the order of their digit
// after their top common bits, which are all alike. It returns ends, in
// ends' storage: the keys of digit d are out[ends[d-1]:ends[d]].
func spreadKeys(keys, out []uint64, common int, ends []int32) []int32 {
	digit := min(digitBits(len(keys)), 64-common)
	shift, mask := 64-common-digit, uint64(1)<<digit-1
	count := slices.Grow(ends[:0], 1<<digit+1)[:1<<digit+1]
	clear(count)
	for _, k := range keys {
		count[k>>shift&mask+1]++
	}
	for d := 1; d < len(count); d++ {
		count[d] += count[d-1] // the first place of digit d
	}
	for _, k := range keys {
		d := k >> shift & mask
		out[count[d]] = k
		count[d]++ // at the end, the place after digit d's last
	}
	return count[:1<<digit]
}

// next is the first bucket after the current one, in the ring's order,
// that holds events.
func (q *Queue) next() (int, bool) {
	for k := 1; k <= ring; {
		i := (q.cur + k) & (ring - 1)
		if w := q.occ[i/64] >> (i % 64); w != 0 {
			return (i + bits.TrailingZeros64(w)) & (ring - 1), true
		}
		k += 64 - i%64
	}
	return 0, false
}

func index(at time.Duration) int { return int(uint64(at)>>spanBits) & (ring - 1) }

// Coming returns the events from place from up to, not including, place
// to after the next. It returns only those the queue knows without work:
// the ones in the bucket being read. A driver prefetches the state those
// events will need, so that it arrives during the work before them.
func (q *Queue) Coming(from, to int) []Event {
	return q.now[min(q.head+from, len(q.now)):min(q.head+to, len(q.now))]
}

// Heap is a 4-ary min-heap of events. It is shallower than a binary heap,
// and its children share cache lines. It is the plain priority queue a
// simulator starts from. The engine's benchmark and the Queue's tests keep
// it as a yardstick.
// The zero Heap is empty and ready; it is not safe for concurrent use.
type Heap []Event

// Len is the number of events waiting.
func (h Heap) Len() int { return len(h) }

// Peek returns the earliest event; the heap must not be empty.
func (h Heap) Peek() Event { return h[0] }

// Push adds e.
func (h *Heap) Push(e Event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 4
		if !s[i].Before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// Pop removes and returns the earliest event; the heap must not be empty.
func (h *Heap) Pop() Event {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		least := i
		for c := 4*i + 1; c <= 4*i+4 && c < len(s); c++ {
			if s[c].Before(s[least]) {
				least = c
			}
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}
