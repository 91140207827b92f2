// Command hello is what the image test packs: a static binary that says
// where it runs.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Printf("hello from %s/%s as uid %d\n", runtime.GOOS, runtime.GOARCH, os.Getuid())
}
