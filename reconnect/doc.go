// Package reconnect times the retries of a device fleet so that the fleet
// does not come back in synchronised waves after an outage.
//
// A [Policy] is a [Shape] with explicit [Limits]. A Shape is the wait
// before retry n: [IoTCore], the formula
// min(2^n x Base + U[0, Jitter], MaxBackoff), and the other well-known
// curves. [RetryForever] must be asked for by name. [FleetSafe] is the
// shape for a large fleet behind a broker that admits only so many connects
// a second. It passes every cell of the simulator's policy grid, where the
// formula and the other shapes do not. A Policy is read-only and shared by
// a whole fleet. A [Backoff] is one device's position in a policy. It is
// small and not safe for concurrent use. It draws its jitter from a
// [math/rand/v2.Source] the caller injects. Runs are thus reproducible from
// a seed, and no two devices share a sequence.
//
// [Retry] runs one operation with a policy. It classifies errors
// ([Permanent], [Classifier], [HTTPError] from [CheckResponse]). It honours
// a server's Retry-After as a floor with jitter on top, capped at
// [DefaultMaxRetryAfter]. It ends with a [*RetryError] matching
// [ErrExhausted], [ErrPermanent] or [ErrCancelled]. [FloodGuard] bounds
// attempts per window whatever a policy says. [Responsive] paces a stream
// of calls against a throttling service.
//
// Everything that waits takes a [Clock], so tests advance a fake clock
// instead of sleeping. Invalid parameters are errors wrapping [ErrInvalid],
// never panics.
package reconnect
