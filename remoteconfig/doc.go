// Package remoteconfig keeps a device's configuration fresh over HTTP. A
// Fetcher GETs the device's Document with If-None-Match. It retries 429 and
// 5xx on the same backoff as the device's reconnects (package reconnect).
// It keeps the last good Document in force, and on disk, across reboots.
//
// A Document is trusted only as far as the firmware's Bounds allow: a
// broken or hostile server cannot turn backoff off. It is taken only from
// the server the device was pointed at, over TLS 1.2 or later with the
// server verified, unless plain http is allowed in so many words.
//
// Errors: every invalid input (a Config) wraps [ErrInvalid]. A rejected
// Document wraps [ErrBadDocument] or [ErrTooLarge]. An answer refused
// unread wraps [ErrRedirectRefused] or [ErrWeakTLS]. A stored file that is
// not the device's own wraps [ErrNotPrivate]. In each case the last good
// Document stays in force.
package remoteconfig

import "errors"

var (
	// ErrInvalid: every invalid input (a Config) is an error wrapping it.
	ErrInvalid = errors.New("remoteconfig: invalid input")
	// ErrTooLarge: the document is over MaxDocumentBytes.
	ErrTooLarge = errors.New("remoteconfig: document over 1 MiB")
	// ErrBadDocument: the document is not strict JSON of the firmware's
	// keys, or sets a value outside the Bounds.
	ErrBadDocument = errors.New("remoteconfig: invalid document")
	// ErrRedirectRefused: the config server redirected to plain http or to
	// another host. The round ends at once; nothing from there is applied.
	ErrRedirectRefused = errors.New("remoteconfig: redirect refused")
	// ErrWeakTLS: the config server answered over TLS older than 1.2, or
	// without its certificate verified (a Client's RoundTripper that the
	// Fetcher could not look into). Nothing it sent is read.
	ErrWeakTLS = errors.New("remoteconfig: connection below TLS 1.2 or unverified")
)
