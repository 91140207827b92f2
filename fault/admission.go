package fault

import (
	"errors"
	"fmt"
)

// AdmissionMode is what is done with a connection over an Admission's rate.
// The zero AdmissionMode is RefuseOverLimit. It is a plain value, safe to
// share.
type AdmissionMode int

const (
	// RefuseOverLimit turns it away at once: the test broker answers
	// CONNACK 3 "server unavailable" (an MQTT 5 client, Admission.Code),
	// the fault proxy resets it.
	RefuseOverLimit AdmissionMode = iota
	// PauseOverLimit keeps it waiting until a token is free. This is what a
	// broker does when it stops accepting and leaves sockets in its listen
	// backlog (EMQX 4's max_conn_rate, HiveMQ's overload protection). The
	// test broker stops accepting. The fault proxy holds the connection,
	// bytes and all.
	PauseOverLimit
	// DisconnectOverLimit accepts it and closes it after its CONNECT (AWS
	// IoT's THROTTLED, EMQX 5's max_conn_rate).
	DisconnectOverLimit
)

var modeNames = [...]string{RefuseOverLimit: "refuse", PauseOverLimit: "pause", DisconnectOverLimit: "disconnect"}

func (m AdmissionMode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("AdmissionMode(%d)", int(m))
}

// ParseAdmissionMode reads "refuse", "pause" or "disconnect".
func ParseAdmissionMode(s string) (AdmissionMode, error) {
	for m, name := range modeNames {
		if name == s {
			return AdmissionMode(m), nil
		}
	}
	return 0, fmt.Errorf("unknown admission mode %q (refuse, pause or disconnect)", s)
}

// Admission admits Rate connections a second with bursts of Burst (0 means
// 1) and does Mode with the rest. The zero Admission admits everything. An
// Admission is a value: safe to share.
type Admission struct {
	Rate  float64
	Burst int
	Mode  AdmissionMode
	// Code is the MQTT 5 reason code an MQTT 5 client is refused with over
	// the limit (RefuseOverLimit): 0 means CodeConnectionRateExceeded; a
	// 3.1.1 client gets CONNACK 3 whatever it says.
	Code byte
}

// The MQTT 5 reason codes a broker refuses with when it is over a limit,
// which an MQTT 5 device takes for back-pressure.
const (
	CodeServerBusy             byte = 0x89
	CodeQuotaExceeded          byte = 0x97
	CodeConnectionRateExceeded byte = 0x9F
)

// RefusalCode is the MQTT 5 reason code a refusal over a's limit sends.
func (a Admission) RefusalCode() byte {
	if a.Code == 0 {
		return CodeConnectionRateExceeded
	}
	return a.Code
}

// ErrInvalid: every invalid input (an Admission) is an error wrapping it.
var ErrInvalid = errors.New("fault: invalid input")

// Validate accepts the zero Admission and any with Rate > 0, Burst >= 0 and
// a known Mode.
func (a Admission) Validate() error {
	switch {
	case a == Admission{}:
		return nil
	case !(a.Rate > 0) || a.Burst < 0:
		return fmt.Errorf("%w: rate %g must be > 0 and burst %d >= 0 (or the zero Admission, no limit)", ErrInvalid, a.Rate, a.Burst)
	case a.Mode < RefuseOverLimit || a.Mode > DisconnectOverLimit:
		return fmt.Errorf("%w: mode %v", ErrInvalid, a.Mode)
	case a.Code != 0 && a.Code < 0x80:
		return fmt.Errorf("%w: an MQTT 5 refusal's code is 0x80 or more (0x89, 0x97, 0x9F), got %#02x", ErrInvalid, a.Code)
	}
	return nil
}
