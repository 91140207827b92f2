package remoteconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/herdguard/herdguard/internal/datadir"
)

// Store keeps the last good configuration across restarts. A nil
// Store (Config.Store unset) keeps nothing. Fetch calls Save
// outside the Fetcher's lock, so a store used by concurrent Fetch calls must
// be safe for concurrent use.
type Store interface {
	// Load returns the stored document and its ETag, or nil if there is none.
	Load() (doc []byte, etag string, err error)
	Save(doc []byte, etag string) error
}

// FileStore is a Store in one file, replaced atomically on Save. The
// zero FileStore has no Path and is not usable: Load finds nothing and Save
// fails. It keeps no state but Path and Dir, and each Save renames a whole
// file into place, so it is safe for concurrent use.
//
// The file is opened through its directory's handle, never through a
// symbolic link, without waiting on a FIFO or a device; Load refuses,
// before reading it, a file that is not regular, belongs to another user
// or has more than one link (an error wrapping ErrNotPrivate).
type FileStore struct {
	// Path is the file; with Dir set, its name within Dir.
	Path string
	// Dir, when set, is the directory Path is in, held open (the agent's
	// data directory). The file is opened through it. No link or rename of
	// the directory's path can thus point it elsewhere. The FileStore does
	// not close it.
	Dir *os.File
}

// ErrNotPrivate is wrapped by a FileStore's error for a file, or a data
// directory, that is not the device's own. Such a file is another user's, a
// link, a FIFO or a device, or a file with more than one link. Nothing in
// it was read, changed or renamed.
var ErrNotPrivate = datadir.ErrNotPrivate

type storedConfig struct {
	ETag string          `json:"etag"`
	Doc  json.RawMessage `json:"doc"`
}

// dir is the directory the file is in, and its name there; done lets the
// directory go if dir opened it.
func (s FileStore) dir() (dir *os.File, name string, done func(), err error) {
	if s.Dir != nil {
		return s.Dir, s.Path, func() {}, nil
	}
	d, name, err := datadir.OpenParent(s.Path)
	if err != nil {
		return nil, "", nil, err
	}
	return d, name, func() { d.Close() }, nil
}

// Load reads the file: nil when there is none.
func (s FileStore) Load() ([]byte, string, error) {
	dir, name, done, err := s.dir()
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("remoteconfig: config store: %w", err)
	}
	defer done()
	f, err := datadir.OpenFile(dir, name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("remoteconfig: config store: %w", err)
	}
	defer f.Close()
	// a stored document passed the same limit
	b, err := io.ReadAll(io.LimitReader(f, 2*MaxDocumentBytes+1024))
	if err != nil {
		return nil, "", err
	}
	var sc storedConfig
	if err := json.Unmarshal(b, &sc); err != nil {
		return nil, "", fmt.Errorf("remoteconfig: config store %s: %w", f.Name(), err)
	}
	return sc.Doc, sc.ETag, nil
}

// Save writes a new file, mode 0600 whatever the umask, and renames it
// into place: whatever was at Path is replaced, never followed.
func (s FileStore) Save(doc []byte, etag string) error {
	b, err := json.Marshal(storedConfig{ETag: etag, Doc: doc})
	if err != nil {
		return err
	}
	dir, name, done, err := s.dir()
	if err != nil {
		return err
	}
	defer done()
	tmp, err := datadir.CreateTemp(dir, ".config-")
	if err != nil {
		return err
	}
	tmpName := filepath.Base(tmp.Name())
	defer datadir.Remove(dir, tmpName) // after a successful rename this finds nothing
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil { // the rename must not land before the data
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return datadir.Rename(dir, tmpName, name)
}
