package datadir

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once the kernel (before 5.6), a seccomp filter or an
// emulator has refused openat2.
var noOpenat2 atomic.Bool

// openDirAt opens the directory name in the directory fd, never through a
// symbolic link: openat2 with RESOLVE_NO_SYMLINKS, or, where openat2 is
// refused, openat with O_NOFOLLOW|O_DIRECTORY.
func openDirAt(fd int, name string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2.Load() {
		n, err := unix.Openat2(fd, name, &unix.OpenHow{Flags: flags,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH})
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return n, err
		}
		noOpenat2.Store(true)
	}
	return unix.Openat(fd, name, flags, 0)
}
