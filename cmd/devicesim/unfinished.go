package main

import (
	"io"
	"os"
	"sync"

	"github.com/herdguard/herdguard/internal/datadir"
)

// writeOut writes data as the file name in the directory dir, made if it
// is missing. dir may be shared: the file is new and replaces what was
// there whole, never following a link planted in its place
// (datadir.WriteShared).
func writeOut(dir, name string, data []byte) error {
	return datadir.WriteSharedIn(dir, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// unfinished holds the files a run has begun and not finished writing. An
// interrupted devicesim removes them on its way out. A report is then
// complete, marked incomplete, or not there.
var unfinished files

type files struct {
	mu    sync.Mutex
	paths map[string]bool
}

func (f *files) add(paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paths == nil {
		f.paths = map[string]bool{}
	}
	for _, p := range paths {
		f.paths[p] = true
	}
}

func (f *files) done(paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range paths {
		delete(f.paths, p)
	}
}

func (f *files) removeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.paths {
		_ = os.Remove(p)
	}
}
