// Package prefetch asks the processor to bring a line of memory into its
// caches without waiting for it: the virtual engine asks for the devices
// its next events touch, and the report's builder for their counters. A
// plain load in their place (what they did before) holds up every
// instruction after it until memory answers, once for each batch of
// reads; a prefetch retires at once, and the line arrives while the events
// before it are handled.
package prefetch
