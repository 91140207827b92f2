//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// openNoWait opens a secret file for reading. It never goes through a
// symbolic link as the last step of the path (O_NOFOLLOW): the link, not
// its target, would be what the directory's writers control. It does not
// wait on a FIFO or a device for a writer (O_NONBLOCK); readSecret then
// refuses what is not a regular file. O_NONBLOCK does not change a regular
// file's reads.
func openNoWait(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	// Linux and macOS say ELOOP for a link under O_NOFOLLOW, FreeBSD EMLINK.
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK) {
		return nil, errLink
	}
	return f, err
}

// owner is the uid that owns the file fi describes; ok is false where the
// system does not say.
func owner(fi os.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
