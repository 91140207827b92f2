package fault_test

import (
	"fmt"

	"github.com/herdguard/herdguard/fault"
)

func ExampleAdmission() {
	// What a broker with AWS IoT's default account limit does to a storm.
	iot := fault.Admission{Rate: 500, Burst: 500, Mode: fault.DisconnectOverLimit}
	fmt.Println(iot.Validate(), iot.Mode)
	fmt.Println(fault.Admission{Rate: -1}.Validate())
	// Output:
	// <nil> disconnect
	// fault: invalid input: rate -1 must be > 0 and burst 0 >= 0 (or the zero Admission, no limit)
}
