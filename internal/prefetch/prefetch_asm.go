//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line asks for the cache line holding p, into every level of cache. It
// is a hint: p is never read through, and may be any address.
//
//go:noescape
func Line(p unsafe.Pointer)
