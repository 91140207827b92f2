// Command devicesim launches a fleet of real device agents against an
// in-process broker, disrupts it, and reports whether the fleet came back
// spread out or in waves. See `devicesim help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// interruptGrace is how long an interrupted command has to stop and write
// what it has; past it devicesim removes the files the run had begun and
// exits.
const interruptGrace = 500 * time.Millisecond

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done:
		case <-time.After(interruptGrace):
			unfinished.removeAll()
			err = errors.New("nothing written")
		}
	}
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "devicesim: interrupted")
		os.Exit(130)
	}
	fmt.Fprintln(os.Stderr, "devicesim:", err)
	var e *exitError
	if errors.As(err, &e) {
		os.Exit(e.code)
	}
	os.Exit(1)
}
