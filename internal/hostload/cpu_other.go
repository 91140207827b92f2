//go:build !unix

package hostload

import "time"

// cpuTime cannot be read here: Share takes the host as idle.
func cpuTime() (time.Duration, bool) { return 0, false }
