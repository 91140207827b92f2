package testbroker_test

import (
	"errors"
	"fmt"
	"syscall"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/testbroker"
)

// An outage seen by a real paho client over the in-memory transport.
func Example_outage() {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	connect := func(id string) error {
		c := paho.NewClient(b.ClientOptions(id))
		tok := c.Connect()
		tok.Wait()
		if tok.Error() == nil {
			defer c.Disconnect(0)
		}
		return tok.Error()
	}

	fmt.Println("before:", connect("dev-1"))
	b.Faults().BeginOutage()
	err = connect("dev-1")
	fmt.Println("during: refused =", errors.Is(err, syscall.ECONNREFUSED))
	if err := b.Faults().EndOutage(); err != nil {
		panic(err)
	}
	fmt.Println("after:", connect("dev-1"))

	c := b.Recorder().Counts()
	fmt.Printf("broker saw %d attempts, %d accepted\n", c.Attempts, c.Accepted)
	// Output:
	// before: <nil>
	// during: refused = true
	// after: <nil>
	// broker saw 2 attempts, 2 accepted
}
