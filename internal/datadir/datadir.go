// Package datadir keeps the agent's data directory its own. The directory
// is held open by one handle. The handle is taken without following a
// symbolic link at any step of its path. The directory is refused where
// another user could swap a step of that path. Every file in the directory
// is opened through that handle. A file is refused unless it is a regular
// file of the agent's, with one link. A file another user planted is never
// read, changed, renamed or used. A FIFO or a device file in a file's
// place never blocks the agent.
//
// The functions take the directory as an *os.File, so that the firmware's
// public packages (device, publisher) can accept it without naming this
// package.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotPrivate is wrapped by every refusal. A refusal is of a directory
// or file another user owns, could write to or could have planted. It is
// also of a symbolic link, a file that is not a regular one, or one with
// more than one link.
var ErrNotPrivate = errors.New("not the agent's own")

// Dir is a data directory held open. Open makes one; the zero value is not
// usable. Its methods are system calls on one descriptor: it is safe for
// concurrent use.
type Dir struct {
	f *os.File
}

// File is the directory's handle, to hand the packages that keep files in
// it (remoteconfig.FileStore.Dir, publisher.BoltOptions.Dir). It stays the
// Dir's: do not close it.
func (d *Dir) File() *os.File { return d.f }

// Path is the directory's absolute path, for messages.
func (d *Dir) Path() string { return d.f.Name() }

// Close lets the handle go.
func (d *Dir) Close() error { return d.f.Close() }

// Warn is how Open reports what it put right (a directory open to others,
// tightened to 0700): a log's Warn.
type Warn func(msg string, args ...any)

// checkName refuses a name that is not one entry of the directory.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		return fmt.Errorf("datadir: %q is not a file name in the directory", name)
	}
	return nil
}

// notPrivate is the refusal of path for why.
func notPrivate(path, why string) error {
	return fmt.Errorf("%w: %s %s", ErrNotPrivate, path, why)
}
