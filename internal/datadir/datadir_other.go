//go:build !unix

package datadir

import (
	"fmt"
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

// open opens name in dir; only its being a regular file is checked.
func (r rules) open(dir *os.File, name string, flag int, perm os.FileMode) (*os.File, error) {
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
		return nil, r.refuse(path, "is not a regular file")
	}
	return f, nil
}

// OpenSharedDir opens the directory at path, refusing a symbolic link;
// ownership and modes are checked on Unix only.
func OpenSharedDir(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, sharedRules.refuse(abs, "is a symbolic link, which the process does not follow: name the directory itself")
	}
	return os.Open(abs)
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
