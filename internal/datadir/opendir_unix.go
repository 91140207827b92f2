//go:build unix && !linux

package datadir

import "golang.org/x/sys/unix"

// openDirAt opens the directory name in the directory fd, never through a
// symbolic link (O_NOFOLLOW|O_DIRECTORY).
func openDirAt(fd int, name string) (int, error) {
	return unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}
