//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Open takes path as the agent's private data directory. It walks the
// path from the root one step at a time. Each step is opened relative to
// the one before and never through a symbolic link. It uses openat2 with
// RESOLVE_NO_SYMLINKS where the kernel has it, O_NOFOLLOW|O_DIRECTORY
// otherwise. No link anywhere on the way, and no rename of a step
// meanwhile, can thus point it elsewhere. Each step before the last must
// belong to root or to the agent's user. If others may write to it, it
// must carry the sticky bit; otherwise another user could replace what
// follows. Steps missing are created 0700. The directory itself must be
// the agent's user's. If others may enter it, it is tightened to 0700 on
// its handle and warn says so.
func Open(path string, warn Warn) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("datadir: /: %w", err)
	}
	at := "/"
	steps := strings.FieldsFunc(abs, func(r rune) bool { return r == '/' })
	for _, step := range steps {
		if err := safeParent(fd, at); err != nil {
			unix.Close(fd)
			return nil, err
		}
		next, created, err := stepInto(fd, step)
		unix.Close(fd)
		at = filepath.Join(at, step)
		if err != nil {
			return nil, fmt.Errorf("datadir: %s: %w", at, err)
		}
		fd = next
		if created {
			if err := unix.Fchmod(fd, 0o700); err != nil { // whatever the umask made it
				unix.Close(fd)
				return nil, fmt.Errorf("datadir: %s: %w", at, err)
			}
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("datadir: %s: %w", abs, err)
	}
	if int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return nil, notPrivate(abs, fmt.Sprintf("belongs to uid %d, not to this agent's uid %d: its owner could replace the queue or the configuration",
			st.Uid, os.Geteuid()))
	}
	if perm := st.Mode & 0o777; perm&0o077 != 0 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("datadir: %s is open to others (%04o) and could not be tightened: %w", abs, perm, err)
		}
		if warn != nil {
			warn("data directory was open to others; tightened to 0700", "dir", abs, "was", fmt.Sprintf("%04o", perm))
		}
	}
	return &Dir{f: os.NewFile(uintptr(fd), abs)}, nil
}

// safeParent refuses a directory on the way to the data directory that
// another user could change. That is one of theirs, or one others may
// write to without the sticky bit. The sticky bit keeps them from
// renaming or removing what is not theirs.
func safeParent(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("datadir: %s: %w", path, err)
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return notPrivate(path, fmt.Sprintf("belongs to uid %d: its owner could replace the data directory within it", st.Uid))
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return notPrivate(path, fmt.Sprintf("is writable by others (%04o) without the sticky bit: another user could replace the data directory within it",
			st.Mode&0o7777))
	}
	return nil
}

// stepInto opens the directory name in the directory fd, never through a
// link, creating it if it is missing; created says whether it did.
func stepInto(fd int, name string) (next int, created bool, err error) {
	next, err = openDirAt(fd, name)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, false, err
		} else if err == nil {
			created = true
		}
		next, err = openDirAt(fd, name) // a link put there meanwhile fails here
	}
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTDIR):
		return -1, false, fmt.Errorf("%w: a symbolic link or not a directory, which the agent does not follow", ErrNotPrivate)
	case err != nil:
		return -1, false, err
	}
	return next, created, nil
}

// open opens name, a file directly in dir, through dir's handle. It
// never goes through a link (O_NOFOLLOW). It does not wait on a FIFO or a
// device (O_NONBLOCK, cleared once the file is known to be a regular
// one). Before reading, changing or renaming anything, it refuses a file
// that is not regular or belongs to another user. It also refuses one
// that has more than one link: another name for it elsewhere could be
// written. Under agentRules the file is then made 0600, whatever the
// umask or an older version made it. flag and perm are os.OpenFile's.
func (r rules) open(dir *os.File, name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, r.refuse(path, fmt.Sprintf("is a symbolic link, which the %s does not follow", r.who))
	case errors.Is(err, unix.EISDIR):
		return nil, r.refuse(path, "is a directory, not a regular file")
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		// Not root, and a file it may not open: whose is it?
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && int(st.Uid) != os.Geteuid() {
			return nil, r.refuse(path, fmt.Sprintf("belongs to uid %d, not to this %s's uid %d", st.Uid, r.who, os.Geteuid()))
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := r.check(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// check checks an open file is this user's regular file with one link,
// tightens it to 0600 if the rules say so, and makes it blocking again.
func (r rules) check(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG:
		return r.refuse(path, fmt.Sprintf("is %s, not a regular file", kind(uint32(st.Mode))))
	case int(st.Uid) != os.Geteuid():
		return r.refuse(path, fmt.Sprintf("belongs to uid %d, not to this %s's uid %d", st.Uid, r.who, os.Geteuid()))
	case st.Nlink != 1:
		return r.refuse(path, fmt.Sprintf("has %d links: another name for it could be written", st.Nlink))
	}
	if r.tighten && st.Mode&0o777 != 0o600 { // open to others, or not writable under a umask of 0277
		if err := unix.Fchmod(fd, 0o600); err != nil {
			return &os.PathError{Op: "chmod", Path: path, Err: err}
		}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags&^unix.O_NONBLOCK)
	}
	if err != nil {
		return &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return nil
}

// OpenSharedDir opens the directory at path, one others may share: the
// simulator's shards meet in one and write their reports to one. The
// steps of path before the last are the user's to name, and followed as
// the system follows them; the last is never a link. The directory is
// refused if a user other than root and this one owns it, or if others
// may write to it without the sticky bit: they could rename, remove or
// replace the files within it. Its group may write to it: on a volume
// shared by pods, the group is the pods' own (Kubernetes' fsGroup).
func OpenSharedDir(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if fi, lerr := os.Lstat(abs); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			to, _ := os.Readlink(abs)
			return nil, sharedRules.refuse(abs, fmt.Sprintf("is a symbolic link (to %s), which the process does not follow: "+
				"name the directory itself", to))
		}
		return nil, &os.PathError{Op: "open", Path: abs, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: abs, Err: err}
	}
	switch {
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		err = sharedRules.refuse(abs, fmt.Sprintf("belongs to uid %d, not to root or this process's uid %d: "+
			"its owner could replace the files within it", st.Uid, os.Geteuid()))
	case st.Mode&0o002 != 0 && st.Mode&unix.S_ISVTX == 0:
		err = sharedRules.refuse(abs, fmt.Sprintf("is writable by others (%04o) without the sticky bit: "+
			"another user could replace the files within it; chmod o-w or +t it", st.Mode&0o7777))
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), abs), nil
}

// kind names a file's type for a refusal.
func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Rename renames oldname to newname within dir.
func Rename(dir *os.File, oldname, newname string) error {
	if err := checkName(oldname); err != nil {
		return err
	}
	if err := checkName(newname); err != nil {
		return err
	}
	if err := unix.Renameat(int(dir.Fd()), oldname, int(dir.Fd()), newname); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(dir.Name(), oldname), New: filepath.Join(dir.Name(), newname), Err: err}
	}
	return nil
}

// Remove removes the file name from dir.
func Remove(dir *os.File, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(int(dir.Fd()), name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	return nil
}

// SameFile reports whether f is still the file named name in dir: a
// process that waited for a lock may hold a file another has since moved.
func SameFile(dir *os.File, name string, f *os.File) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Fstatat(int(dir.Fd()), name, &b, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// OpenParent opens the directory a path names a file in, as a caller that
// was given a path rather than a Dir needs it. It follows links, as the
// path itself would. The files in it are then opened as OpenFile does.
func OpenParent(path string) (*os.File, string, error) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return dir, filepath.Base(path), nil
}
