//go:build !unix

package main

import "os"

// openNoWait opens a secret file for reading.
func openNoWait(path string) (*os.File, error) { return os.Open(path) }
