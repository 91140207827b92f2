// Package testbroker is an in-process MQTT broker (on mochi-mqtt) that
// fails on command and records every attempt. It is for testing device
// fleets against the ways real brokers fail. Its Faults are a
// fault.Breaker, as the fault proxy in front of any other broker is, and it
// records fault.Attempts.
//
// A Broker has the shape of httptest.Server: New (NewUnstarted + Start),
// URL, a blocking Close. What breaks it is its Faults, applied at any time
// while clients are connected: DropAll, BeginOutage/EndOutage/OutageFor,
// SetAdmission, SetFlapping, Refuse, SetConnackLatency, Drain, BeginBusy,
// DropPublishes and DelayPubacks. In an outage the
// listener goes away and comes back on the same address. SetAdmission sets
// a connect rate with one of three over-limit behaviours. Refuse gives
// chosen client IDs a CONNACK code. Its Recorder holds every connection
// attempt (times at accept and at CONNECT, client ID, outcome). It also
// holds every session end with its cause, and every PUBLISH.
//
// Transports: TCP, TLS and Memory. TLS uses a CA made in-process,
// optionally with mutual TLS and device certificates it issues. Memory is
// in-process pipes that need no file descriptors, so that 100,000 clients
// fit in one process.
//
// The broker speaks to 3.1.1 clients as a 3.1.1 broker would. It ends a
// session by closing the socket. It refuses with the 3.1.1 return codes, or
// with a raw code of 0x80 or more to reproduce non-conforming brokers. To
// MQTT 5 clients it speaks MQTT 5. Over its admission limit it refuses with
// Admission.Code. Drain ends sessions with a reason code and a Server
// Reference. BeginBusy refuses every connect with a code of its own.
//
// Errors: every invalid input (a Config, a fault's argument, an Admission)
// wraps [ErrInvalid]. HandshakeCPU fails with [ErrNoThreadCPU] where the
// platform cannot read a thread's CPU time.
package testbroker
