// Package device is the agent that device firmware embeds: it keeps an MQTT
// session, 3.1.1 (paho.mqtt.golang) or 5 (paho.golang), whose every connect
// is timed by package reconnect. On MQTT 5 the broker's reason codes shape
// the wait, never shorten it. Package remoteconfig fetches the device's
// configuration over HTTP on the same backoff.
//
// The client's own reconnect is off (paho's doubles from 1 s without jitter,
// so a fleet using it comes back in lockstep). The Agent's loop makes every
// attempt itself, and the decisions (when to attempt, what each outcome means,
// when to reset, when to give up) live in Machine, a small state machine
// driven by the time passed in, with no socket or goroutine of its own, so a
// simulator can drive a million of them in virtual time.
//
// Two paho v1.5.1 behaviours the agent guards against: a CONNACK code paho
// does not know (an MQTT 5 code sent to a 3.1.1 client) is reported as a
// successful connect on a closed socket, so the agent reads the code off the
// wire; and a failed connect's token completes before paho's status settles,
// so an immediate Connect can be refused by paho itself, which the agent
// retries within the connect timeout rather than counting as an attempt. A
// third: with a persistent session paho completes a publish it resends on
// the next connection before any PUBACK, which Publish reports as
// ErrUnconfirmed rather than success.
//
// Errors: every invalid input (a Config, a Timing) wraps
// [ErrInvalid], and also the ErrInvalid of the package that found it (a
// reconnect policy's); a session ends with [ErrGaveUp], [ErrRefused] or
// [ErrStopped]; a publish fails with [ErrNotConnected], [ErrUnconfirmed],
// [ErrPublishRefused] or [ErrTooLargeForBroker]; the broker's answers are
// [*ConnackError], [*DisconnectError] and [*ProtocolError].
package device
