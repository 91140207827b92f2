package hugepage

import "syscall"

const madvHugepage = 14 // MADV_HUGEPAGE, which package syscall does not name

func advise(b []byte) { _ = syscall.Madvise(b, madvHugepage) }
