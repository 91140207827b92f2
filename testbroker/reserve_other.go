//go:build !linux

package testbroker

import "io"

// reservePort is a no-op where bind-without-listen is not wired up: the port
// is merely likely to be free again when the outage ends.
func reservePort(string) (io.Closer, error) { return nil, nil }
