//go:build unix

package main

import (
	"os"
	"syscall"
)

// openNoWait opens a secret file for reading without waiting on a FIFO or a
// device for a writer. privateSecret then refuses what is not a regular
// file. O_NONBLOCK does not change a regular file's reads.
func openNoWait(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
