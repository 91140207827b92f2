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
//
// A directory others share (the simulator's shards meet in one, and write
// their reports to one) is held the same way by the Shared functions. Its
// path is the user's to name, and its files keep the mode they were made
// with, but a file is opened only through the directory's handle, never
// through a link, never blocking on a FIFO, and only if it is this
// process's user's regular file.
package datadir

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotPrivate is wrapped by every refusal. A refusal is of a directory
// or file another user owns, could write to or could have planted. It is
// also of a symbolic link, a file that is not a regular one, or one with
// more than one link.
var ErrNotPrivate = errors.New("not the agent's own")

// ErrUntrusted is ErrNotPrivate for the Shared functions: wrapped by every
// refusal of a shared directory or of a file in one.
var ErrUntrusted = errors.New("not trusted")

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
func notPrivate(path, why string) error { return agentRules.refuse(path, why) }

// rules are how a file in a directory is opened, checked and refused:
// OpenFile's in the agent's data directory, OpenSharedFile's in a
// directory others share.
type rules struct {
	refusal error  // wrapped by every refusal
	who     string // whose uid a file must have, for messages
	tighten bool   // make the file 0600, whatever it was
}

var (
	agentRules  = rules{refusal: ErrNotPrivate, who: "agent", tighten: true}
	sharedRules = rules{refusal: ErrUntrusted, who: "process"}
)

// refuse is the refusal of path for why.
func (r rules) refuse(path, why string) error { return fmt.Errorf("%w: %s %s", r.refusal, path, why) }

// OpenFile opens name, a file directly in dir, through dir's handle, and
// refuses it unless it is the agent's regular file with one link. flag
// and perm are os.OpenFile's. The file is made 0600.
func OpenFile(dir *os.File, name string, flag int, perm os.FileMode) (*os.File, error) {
	return agentRules.open(dir, name, flag, perm)
}

// OpenSharedFile is OpenFile in a directory others share (OpenSharedDir):
// the same refusals, wrapping ErrUntrusted, but the file keeps its mode.
// flag must not hold O_TRUNC, which would empty a file before it is
// checked: write with WriteShared.
func OpenSharedFile(dir *os.File, name string, flag int, perm os.FileMode) (*os.File, error) {
	return sharedRules.open(dir, name, flag, perm)
}

// CreateTemp creates a new file in dir named prefix followed by a random
// string, 0600, refusing to open anything already there.
func CreateTemp(dir *os.File, prefix string) (*os.File, error) {
	return createTemp(dir, prefix, func(name string) (*os.File, error) {
		return OpenFile(dir, name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	})
}

func createTemp(dir *os.File, prefix string, create func(name string) (*os.File, error)) (*os.File, error) {
	for range 100 {
		f, err := create(fmt.Sprintf("%s%08x", prefix, rand.Uint32()))
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("datadir: no free name for %s* in %s", prefix, dir.Name())
}

// WriteShared writes name in dir, a directory others share, whole: write
// fills a new file of mode perm (less the umask) beside it, which then
// replaces name. A reader sees all of it or none. Whatever was at name (a
// link, a FIFO, another user's file) is replaced, never followed, opened
// or emptied. In a sticky directory another user's file is not replaced
// at all, unless this process is root.
func WriteShared(dir *os.File, name string, perm os.FileMode, write func(io.Writer) error) error {
	f, err := CreateShared(dir, name, perm)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// WriteSharedIn makes the directory path if it is missing (MkdirShared)
// and writes name in it (WriteShared, mode 0644): a command's output file
// in a directory the user named.
func WriteSharedIn(path, name string, write func(io.Writer) error) error {
	dir, err := MkdirShared(path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return WriteShared(dir, name, 0o644, write)
}

// WriteFileIn writes data as name in the directory path (WriteSharedIn):
// a command's output file.
func WriteFileIn(path, name string, data []byte) error {
	return WriteSharedIn(path, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Pending is a file being written under a name of its own, beside the
// name it will replace: CreateShared makes one.
type Pending struct {
	*os.File
	dir  *os.File
	name string // what it replaces on Commit
}

// CreateShared begins name in dir, a directory others share, as
// WriteShared does, for a writer that streams: what is written goes to a
// new file beside name until Commit puts it in name's place; Abort
// removes it. Name (of the embedded file) is where it is meanwhile.
func CreateShared(dir *os.File, name string, perm os.FileMode) (*Pending, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := createTemp(dir, "."+name+".", func(tmp string) (*os.File, error) {
		return OpenSharedFile(dir, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	})
	if err != nil {
		return nil, err
	}
	return &Pending{File: f, dir: dir, name: name}, nil
}

// Commit closes the file and puts it in its name's place, whole.
func (p *Pending) Commit() error {
	tmp := filepath.Base(p.File.Name())
	err := p.File.Close()
	if err == nil {
		err = Rename(p.dir, tmp, p.name)
	}
	if err != nil {
		_ = Remove(p.dir, tmp)
	}
	return err
}

// Abort closes the file and removes it; name is left as it was.
func (p *Pending) Abort() {
	_ = p.File.Close()
	_ = Remove(p.dir, filepath.Base(p.File.Name()))
}

// MkdirShared makes path, with any parents missing, 0755 less the umask
// (as os.MkdirAll), and opens it as OpenSharedDir does.
func MkdirShared(path string) (*os.File, error) {
	made := os.MkdirAll(path, 0o755)
	dir, err := OpenSharedDir(path)
	if err != nil && made != nil && !errors.Is(err, ErrUntrusted) {
		return nil, made // why it is missing says more than that it is
	}
	return dir, err
}
