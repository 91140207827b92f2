// Command ociimage writes an OCI image layout of one static binary, FROM
// scratch, without a daemon: make image runs it for devicesim and
// deviceagent.
//
//	ociimage -out DIR -name NAME [-version V] [-source URL] PLATFORM=BINARY...
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/ociimage"
)

func main() {
	out := flag.String("out", "", "directory for the OCI image layout (required)")
	name := flag.String("name", "", "the binary's name in the image, /NAME its entrypoint (required)")
	version := flag.String("version", "", "the org.opencontainers.image.version label")
	source := flag.String("source", "", "the org.opencontainers.image.source label")
	epoch := flag.Int64("created", 0, "the image's every time, in Unix seconds (SOURCE_DATE_EPOCH)")
	flag.Parse()
	s := ociimage.Spec{Name: *name, Version: *version, Source: *source, Created: time.Unix(*epoch, 0).UTC(), Binaries: map[string]string{}}
	for _, a := range flag.Args() {
		plat, bin, ok := strings.Cut(a, "=")
		if !ok {
			fail(fmt.Errorf("%q: want PLATFORM=BINARY, such as linux/arm64=build/devicesim-arm64", a))
		}
		s.Binaries[plat] = bin
	}
	if *out == "" {
		fail(fmt.Errorf("-out is required"))
	}
	digest, err := ociimage.Build(*out, s)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s: %s (%d platforms)\n", *out, digest, len(s.Binaries))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ociimage:", err)
	os.Exit(1)
}
