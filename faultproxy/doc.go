// Package faultproxy is a TCP proxy that stands between a fleet and any
// MQTT broker (mosquitto, EMQX, HiveMQ, a cloud service). It breaks the
// path on command. A storm test can thus disrupt the broker people run in
// production rather than a test double. The commands:
//
//   - DropAll ends every session, as a broker restart or a load balancer's
//     failover does. The devices see their broker close, and the broker
//     sees a reset.
//   - BeginOutage / EndOutage refuse every connection (a reset) meanwhile.
//   - SetAdmission lets R connections a second through. It refuses, holds
//     or accepts-then-closes the rest.
//   - SetFlapping drops each connection a fixed time after the broker's
//     first bytes.
//   - BeginBlackhole / EndBlackhole make the path silent without a reset,
//     as a NAT or load balancer that forgets its connections does. Only
//     MQTT keepalive notices.
//   - SetLatency adds latency and jitter each way, keeping the bytes in
//     order.
//
// The proxy's memory does not grow with what a client sends. A held
// connection's bytes are kept to be passed on when its turn comes, up to
// MaxHeldBytes. MaxHeldBytes is 64 KiB, far above a device's MQTT CONNECT.
// A client that sends more while held is reset, recorded as Overflowed, and
// logged to Config.Logger. The hold as a whole is bounded too. At most
// Config.MaxHeld connections wait at once, and one more is refused. Their
// bytes together are at most Config.MaxHeldTotal. The client that would go
// over is cut off as Overflowed. What a black hole swallows is read and
// thrown away.
//
// The proxy knows only as much MQTT as it needs to name a connection: the
// client ID of a CONNECT that passes in the clear. TLS passes through end
// to end, untouched. Every connection is recorded with its arrival time and
// what the proxy did with it (Recorder). What was let through is what the
// broker was asked for, whichever broker it is.
//
// Devices reach the proxy over TCP (Config.Listen) or, in the same process,
// in memory (Proxy.Dial).
//
// Errors: every invalid input (a Config, a fault's argument, an Admission)
// wraps [ErrInvalid]. A closed proxy answers [ErrClosed]. A refused
// in-memory dial answers [ErrRefused].
package faultproxy
