//go:build !windows && !plan9 && !solaris && !aix && !js && !wasip1

package publisher

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock on f, the lock bbolt itself takes,
// retrying for timeout. It returns errLocked if another open file holds it.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return err
		case time.Now().After(deadline):
			return errLocked
		}
		time.Sleep(50 * time.Millisecond) // bbolt polls at the same pace
	}
}

// sameFile reports whether f is still the file at path: a process that
// waited for the lock may hold a file another process has since moved.
func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}
