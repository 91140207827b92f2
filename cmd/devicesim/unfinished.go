package main

import (
	"os"
	"sync"
)

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
