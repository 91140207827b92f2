//go:build !linux

package testbroker

import "time"

func threadCPU() (time.Duration, error) { return 0, ErrNoThreadCPU }
