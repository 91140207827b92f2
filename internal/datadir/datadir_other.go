//go:build !unix

package datadir

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Open creates path for the device alone; ownership, modes and links are
// checked on Unix only.
func Open(path string, _ Warn) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	return &Dir{f: f}, nil
}

// OpenFile opens name in dir; only its being a regular file is checked.
func OpenFile(dir *os.File, name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(dir.Name(), name)
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, notPrivate(path, "is not a regular file")
	}
	return f, nil
}

// CreateTemp creates a new file in dir named prefix and a random string.
func CreateTemp(dir *os.File, prefix string) (*os.File, error) {
	for range 100 {
		f, err := OpenFile(dir, fmt.Sprintf("%s%08x", prefix, rand.Uint32()), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("datadir: no free name for %s* in %s", prefix, dir.Name())
}

// Rename renames oldname to newname within dir.
func Rename(dir *os.File, oldname, newname string) error {
	return os.Rename(filepath.Join(dir.Name(), oldname), filepath.Join(dir.Name(), newname))
}

// Remove removes the file name from dir.
func Remove(dir *os.File, name string) error { return os.Remove(filepath.Join(dir.Name(), name)) }

// SameFile reports whether f is still the file named name in dir.
func SameFile(dir *os.File, name string, f *os.File) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(filepath.Join(dir.Name(), name))
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// OpenParent opens the directory a path names a file in.
func OpenParent(path string) (*os.File, string, error) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return dir, filepath.Base(path), nil
}
