// Package policyfit says which reconnect policy a fleet runs, from the
// connection attempts a fault proxy saw after it dropped every session:
// for the whole fleet and each group of devices on one policy, with the
// parameters, a measure of fit and a spec the simulator runs, or why the
// attempts cannot tell.
//
// A device's gaps between arrivals are its waits plus the refused
// attempt's round trip and a few ms of noise; its first arrival is the
// first wait (none if immediate, as paho Go's is) plus its notice of the
// loss, within Options.NoticeWindow. Every family is fitted by maximum
// likelihood from robust first reads: an unjittered curve from the
// differences of a device's successive gaps, in which its round trip
// cancels (each device's round trip then is a random shift, integrated
// out, so lock-step devices must agree to within the noise, searched up
// from its robust read); a jittered family from the edges of each retry's
// waits, round trip and noise on a grid. Whether each first attempt was
// immediate is estimated beside them: at first none for a 2^n jittered
// family whose first wait the window covers (else the same curve a retry
// on). A cap counts only if the gaps see the waits grow to it, and it
// beats no cap by the BIC's price.
//
// The family named is the best by the BIC. It must beat every other by
// Options.Margin, in plain likelihood too where the other has more
// parameters (ErrAmbiguous), and on the devices that retried more than
// once where one family is jittered and the other not; and it must fit
// (ErrNoFamilyFits): the KS distance of its waits' probability integral
// transforms from the uniform, each wait free to move by three noise
// sigmas or 5 %, may not be both over 0.1 and beyond chance at 0.1 %.
//
// A group is split in two when a two-policy mixture beats one family by
// the margin and the BIC's price, each side holds a tenth of it, and the
// sides' own fits tell different policies. Devices neither side claims at
// 99 to 1, and devices their group's fit does not explain at 0.1 %, are
// in no group. The error rates are measured, not assumed: ACCURACY.md.
package policyfit
