//go:build unix

package main

import "syscall"

// descriptors is how many file descriptors this process may hold: its
// soft RLIMIT_NOFILE (which Go raises to the hard limit at start), or 0
// where it cannot be read.
func descriptors() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}
