package remoteconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// MaxDocumentBytes bounds a configuration document.
const MaxDocumentBytes = 1 << 20

// maxConfigHeaderBytes bounds the default client's response headers
// (net/http's own default is 10 MiB).
const maxConfigHeaderBytes = 64 << 10

// MaxETagBytes bounds the ETag a device keeps and sends back. Servers use
// a hash or a version, far shorter; a longer one, or one with bytes an
// ETag may not hold, is not kept (the next fetch is unconditional).
const MaxETagBytes = 256

// validETag says whether an ETag is one to keep: at most MaxETagBytes of
// visible ASCII (RFC 9110's etagc, less obs-text, and without the quotes
// some servers leave out).
func validETag(e string) bool {
	if len(e) > MaxETagBytes {
		return false
	}
	for i := 0; i < len(e); i++ {
		if e[i] < 0x21 || e[i] > 0x7e {
			return false
		}
	}
	return true
}

// Duration is a time.Duration written in JSON as a Go duration string ("30s").
// The zero Duration is 0, which a Document reads as unset. It is a plain
// value, safe to share.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Document is the document a device fetches. Zero fields keep the
// firmware's own values, so the zero Document changes nothing. Copies
// share Reconnect and Settings: treat one as read-only once shared.
type Document struct {
	Reconnect         *ReconnectTuning `json:"reconnect,omitempty"`
	HeartbeatInterval Duration         `json:"heartbeat_interval,omitempty"`
	RefreshInterval   Duration         `json:"refresh_interval,omitempty"`
	// Settings carries the application's own keys, untouched.
	Settings map[string]json.RawMessage `json:"settings,omitempty"`
}

// ReconnectTuning adjusts the IoTCore formula's parameters. The zero
// ReconnectTuning is invalid (Base must be > 0): a document carrying one is
// rejected. It is a plain value, safe to share.
type ReconnectTuning struct {
	Base       Duration `json:"base"`
	Jitter     Duration `json:"jitter"`
	MaxBackoff Duration `json:"max_backoff"`
}

// Bounds are the limits the firmware puts on what a remote configuration may
// set. A value outside them rejects the whole document: a broken or hostile
// config must not be able to turn backoff off and the fleet into a storm.
// The zero Bounds allows no tuning: a document that sets reconnect,
// heartbeat_interval or refresh_interval is rejected. Bounds is a plain
// value that New copies: safe to share.
type Bounds struct {
	Base, Jitter, MaxBackoff [2]time.Duration // [min, max]
	Heartbeat, Refresh       [2]time.Duration
}

// DefaultBounds keeps jitter at least 500 ms and the cap at least 16 s.
var DefaultBounds = Bounds{
	Base:       [2]time.Duration{500 * time.Millisecond, 10 * time.Second},
	Jitter:     [2]time.Duration{500 * time.Millisecond, 10 * time.Second},
	MaxBackoff: [2]time.Duration{16 * time.Second, 15 * time.Minute},
	Heartbeat:  [2]time.Duration{5 * time.Second, time.Hour},
	Refresh:    [2]time.Duration{time.Minute, 24 * time.Hour},
}

func within(name string, v Duration, b [2]time.Duration) error {
	if time.Duration(v) < b[0] || time.Duration(v) > b[1] {
		return fmt.Errorf("%w: %s %v outside [%v, %v]", ErrBadDocument, name, time.Duration(v), b[0], b[1])
	}
	return nil
}

// Check reports the first value of c outside b.
func (b Bounds) Check(c Document) error {
	if r := c.Reconnect; r != nil {
		if err := errors.Join(within("reconnect.base", r.Base, b.Base), within("reconnect.jitter", r.Jitter, b.Jitter),
			within("reconnect.max_backoff", r.MaxBackoff, b.MaxBackoff)); err != nil {
			return err
		}
		if r.MaxBackoff < r.Base {
			return fmt.Errorf("%w: reconnect.max_backoff below reconnect.base", ErrBadDocument)
		}
	}
	if c.HeartbeatInterval != 0 {
		if err := within("heartbeat_interval", c.HeartbeatInterval, b.Heartbeat); err != nil {
			return err
		}
	}
	if c.RefreshInterval != 0 {
		if err := within("refresh_interval", c.RefreshInterval, b.Refresh); err != nil {
			return err
		}
	}
	return nil
}

// Policy returns the reconnect policy c asks for (retrying forever), or nil
// if c does not tune reconnects.
func (c Document) Policy() (*reconnect.Policy, error) {
	if c.Reconnect == nil {
		return nil, nil
	}
	return reconnect.New(reconnect.IoTCore{Base: time.Duration(c.Reconnect.Base), Jitter: time.Duration(c.Reconnect.Jitter),
		MaxBackoff: time.Duration(c.Reconnect.MaxBackoff)}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
}

// parseDocument decodes and checks a document: strictly (checkStrict),
// then within b.
func parseDocument(body []byte, b Bounds) (Document, error) {
	if err := checkStrict(body); err != nil {
		return Document{}, fmt.Errorf("%w: %v", ErrBadDocument, err)
	}
	var c Document
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Document{}, fmt.Errorf("%w: %v", ErrBadDocument, err)
	}
	if err := b.Check(c); err != nil {
		return Document{}, err
	}
	if _, err := c.Policy(); err != nil {
		return Document{}, fmt.Errorf("%w: %v", ErrBadDocument, err)
	}
	return c, nil
}
