// Package device is the agent that device firmware embeds. It keeps an MQTT
// session, 3.1.1 (paho.mqtt.golang) or 5 (paho.golang). Package reconnect
// times its every connect. On MQTT 5 the broker's reason codes shape the
// wait, never shorten it. Package remoteconfig fetches the device's
// configuration over HTTP on the same backoff.
//
// The client's own reconnect is off. paho's doubles from 1 s without
// jitter, so a fleet using it comes back in lockstep. The Agent's loop
// makes every attempt itself. The decisions live in Machine: when to
// attempt, what each outcome means, when to reset, when to give up. Machine
// is a small state machine driven by the time passed in, with no socket or
// goroutine of its own, around the reconnect core (internal/devicecore)
// that devicesim's virtual engine drives a hundred million of in virtual
// time: the simulator decides as the firmware does.
//
// The agent guards against two paho v1.5.1 behaviours. First, paho reports
// a CONNACK code it does not know (an MQTT 5 code sent to a 3.1.1 client)
// as a successful connect on a closed socket. The agent therefore reads the
// code off the wire. Second, a failed connect's token completes before
// paho's status settles. An immediate Connect can then be refused by paho
// itself. The agent retries such a refusal within the connect timeout
// rather than counting it as an attempt. A third behaviour: with a
// persistent session, paho completes a publish it resends on the next
// connection before any PUBACK. Publish reports that publish as
// ErrUnconfirmed rather than success.
//
// Errors: every invalid input (a Config, a Timing) wraps [ErrInvalid]. It
// also wraps the ErrInvalid of the package that found it (a reconnect
// policy's). New's refusal of a Config is a [*ConfigError], which names the
// field at fault. A session ends with [ErrGaveUp], [ErrRefused] or [ErrStopped].
// A publish fails with [ErrNotConnected], [ErrUnconfirmed],
// [ErrPublishRefused] or [ErrTooLargeForBroker]. The broker's answers are
// [*ConnackError], [*DisconnectError] and [*ProtocolError].
package device
