//go:build unix

package testbroker

import "syscall"

// raiseFDLimit lifts the soft RLIMIT_NOFILE to the hard limit. (Go already
// does this at start-up since 1.19, but only for the main program's own
// process limits at that moment; a caller may have lowered it since.)
func raiseFDLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= l.Max {
		return nil
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
