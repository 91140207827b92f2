// Package boltcheck reads a bbolt file as bbolt v1.4 will, with every
// offset bounds-checked, before bbolt sees it. bbolt trusts its file. A
// page id past the end of the map is a fault the runtime cannot recover
// from. A bad page type is a panic. tx.Check and the free-page scan panic
// in goroutines of their own. Check reads the meta page bbolt will pick,
// the freelist, and every page reachable from the root bucket. It hands
// each key and value to its caller, who checks its own schema and records.
// A file that passes is one whose every page a program's operations can
// reach is well formed. publisher's durable queue opens a file only once it
// has passed.
package boltcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The layout (go.etcd.io/bbolt internal/common, v1.4.3), in the host's byte
// order:
//
//	page header   id u64, flags u16, count u16, overflow u32        16 bytes
//	meta          magic u32, version u32, pageSize u32, flags u32,
//	              root bucket {root u64, sequence u64}, freelist u64,
//	              pgid (high water mark) u64, txid u64, checksum u64 (FNV-64a
//	              of the 56 bytes before it), after a page header    64 bytes
//	branch elem   pos u32, ksize u32, pgid u64; key at elem+pos      16 bytes
//	leaf elem     flags u32, pos u32, ksize u32, vsize u32;
//	              key at elem+pos, value right after it              16 bytes
//	bucket value  root u64, sequence u64, then an inline leaf page when root
//	              is 0
//	freelist      count ids (u64); a count of 0xFFFF means the first u64
//	              holds the count
const (
	pageHeaderSize = 16
	elemSize       = 16
	bucketHeader   = 16
	metaSize       = 64
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	noFreelist     = ^uint64(0)
	flagBranch     = 0x01
	flagLeaf       = 0x02
	flagFreelist   = 0x10
	leafIsBucket   = 0x01
	maxTreeDepth   = 64 // bbolt trees are a few levels deep; a cycle is caught before this
	maxBucketDepth = 8
)

var byteOrder = binary.NativeEndian

// DamageError says why a file is not usable. The file is damaged, or is not
// a bbolt file, or not the one its caller expects. That is as opposed to an
// error reading it. The zero DamageError is not meaningful: Damaged makes
// them. Once made it is not changed, so it is safe to share.
type DamageError struct{ msg string }

func (e *DamageError) Error() string { return e.msg }

// Damaged is a *DamageError saying what is wrong, as fmt.Sprintf formats
// it: what a Visit returns for a key or value its caller cannot use.
func Damaged(format string, args ...any) error {
	return &DamageError{fmt.Sprintf(format, args...)}
}

// Visit is called for every key and value of every bucket, in key order,
// with the path of bucket names that leads to it. bucket is true for a
// sub-bucket's entry, whose value is bbolt's. An error it returns ends the
// check, and Check returns it.
type Visit func(path []string, key, value []byte, bucket bool) error

// Diagnosis is what Check learned about a file that passed. The zero Diagnosis
// is a file both of whose meta pages are valid; it is a plain value, safe
// to share.
type Diagnosis struct {
	// MetaFallback: one of the two meta pages is invalid, so bbolt reads
	// the state the other one describes, which may be a transaction older
	// than the last one written.
	MetaFallback bool
}

type meta struct {
	magic, version, pageSize       uint32
	root, freelist, hwm, txid, sum uint64
	valid                          bool
}

func parseMeta(b []byte) meta {
	m := meta{
		magic:    byteOrder.Uint32(b[0:]),
		version:  byteOrder.Uint32(b[4:]),
		pageSize: byteOrder.Uint32(b[8:]),
		root:     byteOrder.Uint64(b[16:]),
		freelist: byteOrder.Uint64(b[32:]),
		hwm:      byteOrder.Uint64(b[40:]),
		txid:     byteOrder.Uint64(b[48:]),
		sum:      byteOrder.Uint64(b[56:]),
	}
	h := fnv.New64a()
	h.Write(b[:56])
	m.valid = m.magic == boltMagic && m.version == boltVersion && m.sum == h.Sum64()
	return m
}

// readMetaAt reads a meta page at off the way bbolt's page-size probe does.
// It reads a whole 4 KiB buffer, or up to the end of the file. ok is false
// if that much cannot be read.
func readMetaAt(r io.ReaderAt, size, off int64, toEOF bool) (m meta, ok bool, err error) {
	buf := make([]byte, 4096)
	n, err := r.ReadAt(buf, off)
	switch {
	case err == nil && n == len(buf):
	case errors.Is(err, io.EOF) && toEOF && int64(n) == size-off:
	case err != nil && !errors.Is(err, io.EOF):
		return meta{}, false, err
	default:
		return meta{}, false, nil
	}
	if n < pageHeaderSize+metaSize {
		return meta{}, true, nil
	}
	return parseMeta(buf[pageHeaderSize : pageHeaderSize+metaSize]), true, nil
}

// pageSizeOf finds the page size as bbolt's getPageSize does: from the
// first meta page if it is valid, else from a valid meta page at 1 KiB,
// 2 KiB, ... 16 MiB, else the OS page size if either could be read at all.
func pageSizeOf(r io.ReaderAt, size int64) (int64, error) {
	m, readable, err := readMetaAt(r, size, 0, false)
	if err != nil {
		return 0, err
	}
	if m.valid {
		return int64(m.pageSize), nil
	}
	for i := 0; i <= 14; i++ {
		pos := int64(1024) << i
		if pos >= size-1024 {
			break
		}
		m, ok, err := readMetaAt(r, size, pos, true)
		if err != nil {
			return 0, err
		}
		readable = readable || ok
		if m.valid {
			return int64(m.pageSize), nil
		}
	}
	if readable {
		return int64(os.Getpagesize()), nil
	}
	return 0, Damaged("no readable meta page")
}

// checker walks one file.
type checker struct {
	r        io.ReaderAt
	size     int64
	pageSize int64
	hwm      uint64
	free     map[uint64]bool
	seen     map[uint64]bool
	leaf     Visit
}

// Check reports whether the bbolt file r (size bytes) is one that bbolt can
// open and its caller use without either of them reaching a malformed page.
// It calls visit for every key and value. An error that is not a
// *DamageError, nor one visit returned, is a failure to read. An empty file
// passes: bbolt writes its first pages.
func Check(r io.ReaderAt, size int64, visit Visit) (Diagnosis, error) {
	if size == 0 {
		return Diagnosis{}, nil
	}
	ps, err := pageSizeOf(r, size)
	if err != nil {
		return Diagnosis{}, err
	}
	if ps < 1024 || ps > 64<<10 || ps&(ps-1) != 0 {
		return Diagnosis{}, Damaged("page size %d", ps)
	}
	if size < 2*ps {
		return Diagnosis{}, Damaged("file of %d bytes is shorter than two %d-byte pages", size, ps)
	}
	c := &checker{r: r, size: size, pageSize: ps, free: map[uint64]bool{}, seen: map[uint64]bool{0: true, 1: true}, leaf: visit}
	use, fallback, err := c.meta()
	if err != nil {
		return Diagnosis{}, err
	}
	if int64(use.pageSize) != ps {
		return Diagnosis{}, Damaged("meta page size %d, file read with %d", use.pageSize, ps)
	}
	if use.hwm < 2 || use.hwm > uint64(size/ps) {
		return Diagnosis{}, Damaged("high water mark %d outside a file of %d pages", use.hwm, size/ps)
	}
	c.hwm = use.hwm
	if use.root < 2 || use.root >= c.hwm {
		return Diagnosis{}, Damaged("root page %d outside [2, %d)", use.root, c.hwm)
	}
	if use.freelist != noFreelist {
		if err := c.freelist(use.freelist); err != nil {
			return Diagnosis{}, err
		}
	}
	if _, _, err := c.tree(use.root, nil, nil, 0, nil, 0); err != nil {
		return Diagnosis{}, err
	}
	if use.freelist != noFreelist { // bbolt's Check: every page reachable or free
		for id := uint64(2); id < c.hwm; id++ {
			if !c.seen[id] && !c.free[id] {
				return Diagnosis{}, Damaged("page %d neither reachable nor free", id)
			}
		}
	}
	return Diagnosis{MetaFallback: fallback}, nil
}

// meta is the meta page bbolt's meta() picks: the one of the higher txid
// if it is valid, else the other one; fallback when either is invalid.
func (c *checker) meta() (use meta, fallback bool, err error) {
	var m [2]meta
	for i := range m {
		b, err := c.read(int64(i)*c.pageSize+pageHeaderSize, metaSize)
		if err != nil {
			return meta{}, false, err
		}
		m[i] = parseMeta(b)
	}
	a, b := m[0], m[1]
	if m[1].txid > m[0].txid {
		a, b = m[1], m[0]
	}
	fallback = !m[0].valid || !m[1].valid
	switch {
	case a.valid:
		return a, fallback, nil
	case b.valid:
		return b, fallback, nil
	}
	return meta{}, false, Damaged("both meta pages are invalid")
}

func (c *checker) read(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > c.size || n > c.size-off {
		return nil, Damaged("read of %d bytes at %d past the end of the file", n, off)
	}
	b := make([]byte, n)
	if _, err := c.r.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Damaged("file shorter than it says")
		}
		return nil, err
	}
	return b, nil
}

// span reads page id and its overflow pages after checking its header.
func (c *checker) span(id uint64, wantFlags ...uint16) (hdr pageHdr, body []byte, err error) {
	if id < 2 || id >= c.hwm {
		return hdr, nil, Damaged("page %d outside [2, %d)", id, c.hwm)
	}
	h, err := c.read(int64(id)*c.pageSize, pageHeaderSize)
	if err != nil {
		return hdr, nil, err
	}
	hdr = parseHdr(h)
	if hdr.id != id {
		return hdr, nil, Damaged("page %d says it is page %d", id, hdr.id)
	}
	ok := false
	for _, f := range wantFlags {
		ok = ok || hdr.flags == f
	}
	if !ok {
		return hdr, nil, Damaged("page %d has flags %#x", id, hdr.flags)
	}
	if uint64(hdr.overflow) >= c.hwm-id {
		return hdr, nil, Damaged("page %d overflows %d pages past the high water mark", id, hdr.overflow)
	}
	for p := id; p <= id+uint64(hdr.overflow); p++ {
		if c.seen[p] {
			return hdr, nil, Damaged("page %d referenced twice", p)
		}
		if c.free[p] {
			return hdr, nil, Damaged("page %d is both reachable and free", p)
		}
		c.seen[p] = true
	}
	body, err = c.read(int64(id)*c.pageSize, (int64(hdr.overflow)+1)*c.pageSize)
	return hdr, body, err
}

type pageHdr struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

func parseHdr(b []byte) pageHdr {
	return pageHdr{id: byteOrder.Uint64(b[0:]), flags: byteOrder.Uint16(b[8:]), count: byteOrder.Uint16(b[10:]),
		overflow: byteOrder.Uint32(b[12:])}
}

func (c *checker) freelist(id uint64) error {
	hdr, body, err := c.span(id, flagFreelist)
	if err != nil {
		return err
	}
	start, count := uint64(pageHeaderSize), uint64(hdr.count)
	if hdr.count == 0xFFFF {
		if len(body) < pageHeaderSize+8 {
			return Damaged("freelist page %d too short for its count", id)
		}
		count = byteOrder.Uint64(body[pageHeaderSize:])
		start += 8
	}
	if count > (uint64(len(body))-start)/8 {
		return Damaged("freelist page %d lists %d ids, more than it holds", id, count)
	}
	for i := uint64(0); i < count; i++ {
		p := byteOrder.Uint64(body[start+8*i:])
		switch {
		case p < 2 || p >= c.hwm:
			return Damaged("freelist page %d lists page %d outside [2, %d)", id, p, c.hwm)
		case c.free[p]:
			return Damaged("page %d freed twice", p)
		case c.seen[p]:
			return Damaged("freelist page %d lists itself (page %d)", id, p)
		}
		c.free[p] = true
	}
	return nil
}

// elems returns the element table of a branch or leaf page held in body.
func elems(body []byte, count uint16) error {
	if uint64(pageHeaderSize)+uint64(count)*elemSize > uint64(len(body)) {
		return Damaged("%d elements overrun a %d-byte page", count, len(body))
	}
	return nil
}

// slice returns body[off:off+n] or a damage error, in 64-bit arithmetic so
// that no u32 from the file can wrap an int on a 32-bit device.
func slice(body []byte, off, n uint64) ([]byte, error) {
	if off > uint64(len(body)) || n > uint64(len(body))-off {
		return nil, Damaged("element of %d bytes at %d overruns a %d-byte page", n, off, len(body))
	}
	return body[off : off+n], nil
}

// tree checks the subtree at page id. Keys are checked as bbolt's own check
// does (tx_check.go, recursivelyCheckPageKeyOrderInternal). Keys ascend
// within a page. A child's keys lie in [its branch key, the next branch
// key). Keys are also checked as bbolt's writes rely on without checking.
// No key is empty. Each branch key is its child's first key, as a write
// finds the child in its parent by that key. A branch has at least two
// children, as a merge asserts. It returns the subtree's first and largest
// keys.
func (c *checker) tree(id uint64, minKey, maxKey []byte, depth int, path []string, bucketDepth int) (first, last []byte, err error) {
	if depth > maxTreeDepth {
		return nil, nil, Damaged("tree deeper than %d pages", maxTreeDepth)
	}
	hdr, body, err := c.span(id, flagBranch, flagLeaf)
	if err != nil {
		return nil, nil, err
	}
	if hdr.flags == flagLeaf {
		return c.leafPage(body, hdr.count, minKey, maxKey, path, bucketDepth)
	}
	if hdr.count < 2 {
		return nil, nil, Damaged("branch page %d has %d children", id, hdr.count)
	}
	if err := elems(body, hdr.count); err != nil {
		return nil, nil, err
	}
	keys := make([][]byte, hdr.count)
	kids := make([]uint64, hdr.count)
	for i := range keys {
		e := uint64(pageHeaderSize) + uint64(i)*elemSize
		pos, ksize := uint64(byteOrder.Uint32(body[e:])), uint64(byteOrder.Uint32(body[e+4:]))
		kids[i] = byteOrder.Uint64(body[e+8:])
		if keys[i], err = key(body, e+pos, ksize); err != nil {
			return nil, nil, err
		}
	}
	running := minKey
	for i, k := range keys {
		if err := keyOrder(i, k, running, maxKey); err != nil {
			return nil, nil, fmt.Errorf("branch page %d: %w", id, err)
		}
		next := maxKey
		if i < len(keys)-1 {
			next = keys[i+1]
		}
		childFirst, childLast, err := c.tree(kids[i], k, next, depth+1, path, bucketDepth)
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Equal(childFirst, k) {
			return nil, nil, Damaged("branch page %d: key %d is not its child's first key", id, i)
		}
		running = childLast
	}
	return keys[0], running, nil
}

// key returns a non-empty key at body[off:off+n].
func key(body []byte, off, n uint64) ([]byte, error) {
	if n == 0 {
		return nil, Damaged("an empty key")
	}
	return slice(body, off, n)
}

// keyOrder is bbolt's verifyKeyOrder.
func keyOrder(i int, key, prev, maxKey []byte) error {
	if i == 0 && prev != nil && bytes.Compare(prev, key) > 0 {
		return Damaged("first key below its parent's")
	}
	if i > 0 && bytes.Compare(prev, key) >= 0 {
		return Damaged("keys out of order")
	}
	if maxKey != nil && bytes.Compare(key, maxKey) >= 0 {
		return Damaged("key at or above the next branch key")
	}
	return nil
}

func (c *checker) leafPage(body []byte, count uint16, minKey, maxKey []byte, path []string, bucketDepth int) (first, last []byte, err error) {
	if err := elems(body, count); err != nil {
		return nil, nil, err
	}
	running := minKey
	for i := 0; i < int(count); i++ {
		e := uint64(pageHeaderSize) + uint64(i)*elemSize
		flags := byteOrder.Uint32(body[e:])
		pos, ksize, vsize := uint64(byteOrder.Uint32(body[e+4:])), uint64(byteOrder.Uint32(body[e+8:])), uint64(byteOrder.Uint32(body[e+12:]))
		k, err := key(body, e+pos, ksize)
		if err != nil {
			return nil, nil, err
		}
		value, err := slice(body, e+pos+ksize, vsize)
		if err != nil {
			return nil, nil, err
		}
		if err := keyOrder(i, k, running, maxKey); err != nil {
			return nil, nil, err
		}
		if i == 0 {
			first = k
		}
		running = k
		switch flags {
		case 0:
			if err := c.leaf(path, k, value, false); err != nil {
				return nil, nil, err
			}
		case leafIsBucket:
			if err := c.leaf(path, k, value, true); err != nil {
				return nil, nil, err
			}
			if err := c.bucket(value, append(path[:len(path):len(path)], string(k)), bucketDepth+1); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, Damaged("leaf element flags %#x", flags)
		}
	}
	if count == 0 {
		return nil, nil, nil
	}
	return first, running, nil
}

// bucket checks a sub-bucket from its value in the parent's leaf.
func (c *checker) bucket(value []byte, path []string, depth int) error {
	if depth > maxBucketDepth {
		return Damaged("buckets nested deeper than %d", maxBucketDepth)
	}
	if len(value) < bucketHeader {
		return Damaged("bucket %q: value of %d bytes", path, len(value))
	}
	if root := byteOrder.Uint64(value); root != 0 {
		_, _, err := c.tree(root, nil, nil, 0, path, depth)
		return err
	}
	// An inline bucket: a leaf page inside the value, never holding buckets.
	inline := value[bucketHeader:]
	if len(inline) < pageHeaderSize {
		return Damaged("bucket %q: inline page of %d bytes", path, len(inline))
	}
	hdr := parseHdr(inline)
	if hdr.flags != flagLeaf {
		return Damaged("bucket %q: inline page flags %#x", path, hdr.flags)
	}
	inner := *c
	inner.leaf = func(p []string, k, v []byte, isBucket bool) error {
		if isBucket {
			return Damaged("bucket %q: an inline bucket holds a bucket", path)
		}
		return c.leaf(p, k, v, false)
	}
	_, _, err := inner.leafPage(inline, hdr.count, nil, nil, path, depth)
	return err
}
