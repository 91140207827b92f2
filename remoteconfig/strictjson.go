package remoteconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// keySet is the keys an object of ours may hold, spelt exactly, and for
// each the keys of the object it holds in turn (nil: any value).
type keySet map[string]keySet

// configKeys are a configuration document's keys. encoding/json matches
// keys without regard to case and keeps the last of two. A document with
// "heartbeat_interval" and "HEARTBEAT_INTERVAL" would thus be read with one
// of them silently winning. checkStrict refuses it first.
var configKeys = keySet{
	"reconnect":          {"base": nil, "jitter": nil, "max_backoff": nil},
	"heartbeat_interval": nil,
	"refresh_interval":   nil,
	"settings":           nil, // the application's: any keys, but none twice
}

// checkStrict refuses what encoding/json would take but a device should not
// guess at. It refuses a document that is not one object (null included).
// It refuses a key twice in one object, or twice but for case. It refuses a
// key of ours spelt in another case. It refuses null for a key of ours. It
// refuses anything after the document.
func checkStrict(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("the document must be one JSON object, not %s", describe(tok))
	}
	if err := strictObject(dec, configKeys, 1); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the document")
	}
	return nil
}

// maxConfigDepth bounds how deep a document nests, so that checking one
// takes little stack.
const maxConfigDepth = 32

// strictObject reads an object's members, its '{' already read, depth
// levels down. keys, when not nil, are the only names it may hold.
func strictObject(dec *json.Decoder, keys keySet, depth int) error {
	if depth > maxConfigDepth {
		return fmt.Errorf("nested deeper than %d levels", maxConfigDepth)
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string) // an object's keys are strings, or Token fails
		folded := foldKey(key)
		if prev, ok := seen[folded]; ok {
			if prev == key {
				return fmt.Errorf("key %q appears twice", key)
			}
			return fmt.Errorf("keys %q and %q differ only in case", prev, key)
		}
		seen[folded] = key
		if keys == nil {
			if err := strictValue(dec, nil, "", depth); err != nil {
				return err
			}
			continue
		}
		inner, ours := keys[key]
		if !ours {
			for k := range keys {
				if strings.EqualFold(k, key) {
					return fmt.Errorf("key %q must be spelt %q", key, k)
				}
			}
			return fmt.Errorf("unknown key %q", key)
		}
		if err := strictValue(dec, inner, key, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// strictValue reads one value within an object depth levels down. That is
// the value of our key name, or any value when name is "". If the value is
// an object, keys holds the names it may hold.
func strictValue(dec *json.Decoder, keys keySet, name string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		if name != "" {
			return fmt.Errorf("key %q is null: leave it out to keep the firmware's value", name)
		}
	case json.Delim('{'):
		return strictObject(dec, keys, depth+1)
	case json.Delim('['):
		if depth+1 > maxConfigDepth {
			return fmt.Errorf("nested deeper than %d levels", maxConfigDepth)
		}
		for dec.More() {
			if err := strictValue(dec, nil, "", depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}

// foldKey maps a key to one spelling for all the keys equal to it under
// Unicode simple case folding, as strings.EqualFold compares them.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

func describe(tok json.Token) string {
	switch tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
