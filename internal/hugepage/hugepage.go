// Package hugepage makes the large slices of a simulation of millions of
// devices, backed by 2 MiB pages where Linux allows. With 4 KiB pages,
// state read at random across gigabytes misses the TLB on nearly every
// read. A hundred million devices span 1.6 million of those pages. Each
// miss costs a walk of the page tables on top of the cache miss.
package hugepage

import "unsafe"

// min is the smallest slice worth asking for: two huge pages.
const min = 4 << 20

// Make returns make([]T, n), asking the kernel to back it with huge pages
// (transparent huge pages in madvise mode, as most distributions ship)
// before anything touches it. A kernel that refuses changes nothing but
// the speed.
func Make[T any](n int) []T {
	s := make([]T, n)
	if size := uintptr(n) * unsafe.Sizeof(*new(T)); size >= min {
		advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size))
	}
	return s
}
