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
