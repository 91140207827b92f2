//go:build unix

package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// ownDataDir makes dir the device's own before anything is read from or
// written to it: created 0700 if missing; refused if another user owns it
// (they could swap its files); tightened to 0700, with a warning, if it
// lets others in. The files in it are opened without following symlinks.
func ownDataDir(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	if os.IsNotExist(err) {
		return mkdirPrivate(dir)
	}
	if err != nil {
		return fmt.Errorf("-data-dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("-data-dir %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("-data-dir %s belongs to uid %d, not to this agent's uid %d: its owner could replace the queue or the configuration",
			dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("-data-dir %s is open to others (%04o) and could not be tightened: %w", dir, perm, err)
		}
		log.Warn("data directory was open to others; tightened to 0700", "dir", dir, "was", fmt.Sprintf("%04o", perm))
	}
	return nil
}

// mkdirPrivate creates dir and any missing parent, each 0700 whatever the
// umask: MkdirAll would leave a parent 0500 under umask 0277, and this
// agent unable to enter it.
func mkdirPrivate(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("-data-dir: %w", err)
	}
	return os.Chmod(dir, 0o700)
}
