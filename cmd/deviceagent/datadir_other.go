//go:build !unix

package main

import (
	"log/slog"
	"os"
)

// ownDataDir creates dir for the device alone; ownership and modes are
// checked on Unix only.
func ownDataDir(dir string, _ *slog.Logger) error { return os.MkdirAll(dir, 0o700) }
