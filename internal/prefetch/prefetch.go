// Package prefetch asks the processor to bring a line of memory into its
// caches without waiting for it. The virtual engine asks for the devices
// its next events touch. The report's builder asks for their counters.
// Before, they used a plain load in its place. A load holds up every
// instruction after it until memory answers, once for each batch of reads.
// A prefetch retires at once. The line arrives while the events before it
// are handled.
package prefetch
