package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
)

// cpuProfiled starts a CPU profile to the file that a leading -cpuprofile
// FILE names. make pgo profiles the grid and the default run this way. It
// returns the arguments after it and what stops it.
func cpuProfiled(args []string) (rest []string, stop func() error, err error) {
	stop = func() error { return nil }
	if len(args) == 0 {
		return args, stop, nil
	}
	name, path, given := strings.Cut(args[0], "=")
	if name != "-cpuprofile" && name != "--cpuprofile" {
		return args, stop, nil
	}
	args = args[1:]
	if !given {
		if len(args) == 0 {
			return nil, stop, fmt.Errorf("-cpuprofile needs a file")
		}
		path, args = args[0], args[1:]
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, stop, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, stop, fmt.Errorf("-cpuprofile: %w", err)
	}
	return args, func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
