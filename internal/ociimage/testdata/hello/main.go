// Command hello is what the image test packs: a static binary that says
// where it runs. It needs the runtime and syscall alone, not fmt and os:
// the test compiles it twice on an empty build cache.
package main

import (
	"runtime"
	"syscall"
)

func main() {
	println("hello from", runtime.GOOS+"/"+runtime.GOARCH, "as uid", syscall.Getuid()) // to stderr
}
