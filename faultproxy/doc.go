// Package faultproxy is a TCP proxy that stands between a fleet and any
// MQTT broker (mosquitto, EMQX, HiveMQ, a cloud service) and breaks the path
// on command, so that a storm test can disrupt the broker people run in
// production rather than a test double:
//
//   - DropAll ends every session, as a broker restart or a load balancer's
//     failover does: the devices see their broker close, the broker a reset;
//   - BeginOutage / EndOutage refuse every connection (a reset) meanwhile;
//   - SetAdmission lets R connections a second through and refuses, holds or
//     accepts-then-closes the rest;
//   - SetFlapping drops each connection a fixed time after the broker's first
//     bytes;
//   - BeginBlackhole / EndBlackhole make the path silent without a reset, as
//     a NAT or load balancer that forgets its connections: only MQTT
//     keepalive notices;
//   - SetLatency adds latency and jitter each way, keeping the bytes in order.
//
// The proxy's memory does not grow with what a client sends. A held
// connection's bytes are kept to be passed on when its turn comes, up to
// MaxHeldBytes (64 KiB, far above a device's MQTT CONNECT): a client that
// sends more while held is reset, recorded as Overflowed, and logged to
// Config.Logger. The hold as a whole is bounded too: at most Config.MaxHeld
// connections wait at once (one more is refused), and their bytes together
// at most Config.MaxHeldTotal (the client that would go over is cut off as
// Overflowed). What a black hole swallows is read and thrown away.
//
// The proxy knows only as much MQTT as it needs to name a connection: the
// client ID of a CONNECT that passes in the clear. TLS passes through end to
// end, untouched. Every connection is recorded with its arrival time and
// what the proxy did with it (Recorder): what was let through is what the
// broker was asked for, whichever broker it is.
//
// Devices reach the proxy over TCP (Config.Listen) or, in the same process,
// in memory (Proxy.Dial).
//
// Errors: every invalid input (a Config, a fault's argument, an Admission)
// wraps [ErrInvalid]; a closed proxy answers [ErrClosed], and a refused
// in-memory dial [ErrRefused].
package faultproxy
