package devicecore

// codeClass is what a broker's refusal or DISCONNECT code asks of the
// timing. MQTT 3.1.1's CONNACK codes (1 to 5) and MQTT 5's reason codes
// (0x80 and up) do not overlap, so one table serves both.
type codeClass uint8

const (
	plainFailure codeClass = iota // retried on the policy's schedule
	permanent                     // no retry of this firmware and client ID will succeed: stop
	credentials                   // retried at the cap (unless Timing.Credentials is CredentialsArePermanent)
	backPressure                  // the broker is over a limit: the wait stretches (Core.stretch)
)

// classOf classes a code. 0, NoConnack and every code not named are plain
// failures. They include 3 server unavailable, 0x88 server unavailable
// and 0x8B server shutting down. They also include 0x9C and 0x9D, whose
// Server Reference the agent follows.
func classOf(code int) codeClass {
	switch code {
	// unacceptable or unsupported protocol version; identifier rejected or
	// not valid
	case 1, 2, 0x84, 0x85:
		return permanent
	// bad credentials, not authorised, banned, bad authentication method
	case 4, 5, 0x86, 0x87, 0x8A, 0x8C:
		return credentials
	case 0x89, 0x97, 0x9F: // server busy, quota exceeded, connection rate exceeded
		return backPressure
	}
	return plainFailure
}
