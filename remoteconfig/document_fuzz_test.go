package remoteconfig

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzParseDocument feeds arbitrary documents to the parser a device applies
// remote configuration with: the answer is an error wrapping
// ErrBadDocument, or a configuration inside DefaultBounds whose policy
// builds and which survives a round trip through JSON. Never a panic.
func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		`{"reconnect":{"base":"1s","jitter":"1s","max_backoff":"64s"},"heartbeat_interval":"30s"}`,
		`{"refresh_interval":"2h","settings":{"telemetry":"on","n":[1,2]}}`,
		`{"reconnect":{"base":"1ms","jitter":"0s","max_backoff":"1ms"}}`,
		`{"heartbeat_interval":30}`, `{"reconect":{}}`, `{} {}`, `{"heartbeat_interval":"9223372036854775807ns"}`,
		`null`, `[]`, `{"reconnect":null}`, `{"reconnect":{"base":"-1s"}}`,
		`{"heartbeat_interval":"30s","HEARTBEAT_INTERVAL":"5s"}`, `{"settings":{"a":1,"a":2}}`, `{"heartbeat_interval":"30s"}}`,
		`{"settings":{"k":"\u212a","K":1}}`, `{"settings":{"x":[[[[{"y":null}]]]]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := parseDocument(doc, DefaultBounds)
		if err != nil {
			if !errors.Is(err, ErrBadDocument) {
				t.Fatalf("%q: error %v does not wrap ErrBadDocument", doc, err)
			}
			return
		}
		if err := DefaultBounds.Check(c); err != nil {
			t.Fatalf("%q accepted outside the bounds: %v", doc, err)
		}
		if _, err := c.Policy(); err != nil {
			t.Fatalf("%q accepted with an unusable policy: %v", doc, err)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		c2, err := parseDocument(again, DefaultBounds)
		if err != nil {
			t.Fatalf("%q re-encoded as %q is rejected: %v", doc, again, err)
		}
		if !reflect.DeepEqual(normal(c), normal(c2)) {
			t.Fatalf("round trip changed %q: %+v != %+v", doc, c, c2)
		}
	})
}

// normal re-encodes the application's settings so that two documents that
// differ only in their JSON spacing compare equal (and no settings is none).
func normal(c Document) Document {
	if len(c.Settings) == 0 {
		c.Settings = nil
	}
	for k, v := range c.Settings {
		var x any
		if json.Unmarshal(v, &x) == nil {
			c.Settings[k], _ = json.Marshal(x)
		}
	}
	return c
}
