package csvrow_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/herdguard/herdguard/internal/csvrow"
)

// A record whose quoted field spans lines is one record, named by the line
// it starts on.
func ExampleReader() {
	r := csvrow.NewReader(strings.NewReader("device,note\n# a comment\ndev-1,\"two\nlines\"\ndev-2, plain \n"), ',', 1<<16)
	for {
		fields, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("line %d: %q\n", r.Line(), fields)
	}
	// Output:
	// line 1: ["device" "note"]
	// line 3: ["dev-1" "two\nlines"]
	// line 5: ["dev-2" "plain"]
}
