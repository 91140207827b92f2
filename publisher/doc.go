// Package publisher is store-and-forward telemetry for a device. Publish
// accepts a message at any time and never waits for the network. Run
// delivers the queue at QoS 1, in order, one message at a time. It removes
// a message only once the broker acknowledged it. A fleet flushing its
// backlog after an outage is paced (DrainRate). Failures back off through a
// package reconnect policy.
//
// The queue lives in a Store: MemoryStore (lost with the process) or
// BoltStore (a go.etcd.io/bbolt file that survives SIGKILL and reboots).
// OpenBoltStore checks every page of the file before bbolt reads it. It
// moves a damaged file aside rather than deleting it. It refuses a store
// another process holds (ErrStoreInUse). Queue bounds are in messages and
// bytes, with DropOldest or RejectNew. Stats are exact. Under DropOldest a
// full disk also drops the oldest messages: it never refuses the newest
// while older ones remain.
//
// Every message travels in an Envelope carrying its store's epoch and its
// sequence number. (epoch, seq) never names two messages. The sequence
// restarts only with a new epoch: a MemoryStore in each process, a store
// moved aside, a factory reset. A receiver drops duplicates by keeping, per
// device and epoch, the highest seq it has seen.
//
// Errors: every invalid input (a message, a Config, BoltOptions) wraps
// [ErrInvalid]. A full queue under RejectNew is [ErrQueueFull]. A store
// another process holds is [ErrStoreInUse]. A store not the device's own is
// [ErrNotPrivate]. A damaged one is a [*CorruptStoreError].
package publisher
