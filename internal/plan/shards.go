package plan

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// DisruptAt is when the storm's first disruption strikes on the wall
// clock, so that shards on several machines strike one broker at once: an
// instant (At), or After once every shard's fleet is up (After > 0). The
// zero DisruptAt strikes as soon as the fleet is up.
type DisruptAt struct {
	At    time.Time
	After time.Duration
}

// ParseDisruptAt reads an RFC 3339 instant (2026-11-27T15:04:05Z) or
// "+D" (+30s), a wall-clock duration after every shard is ready.
func ParseDisruptAt(s string) (DisruptAt, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return DisruptAt{}, fmt.Errorf("disrupt-at %q: want +D, a duration after every shard is ready (+30s)", s)
		}
		return DisruptAt{After: d}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return DisruptAt{}, fmt.Errorf("disrupt-at %q: want an RFC 3339 instant (2026-11-27T15:04:05Z) or +D (+30s)", s)
	}
	return DisruptAt{At: t}, nil
}

func (d DisruptAt) String() string {
	switch {
	case d.After > 0:
		return "+" + d.After.String()
	case !d.At.IsZero():
		return d.At.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// IsZero reports whether d leaves the strike to the fleet's readiness.
func (d DisruptAt) IsZero() bool { return d.After == 0 && d.At.IsZero() }

// UnmarshalText reads what ParseDisruptAt reads, for flags.
func (d *DisruptAt) UnmarshalText(b []byte) (err error) {
	if len(b) == 0 {
		*d = DisruptAt{}
		return nil
	}
	*d, err = ParseDisruptAt(string(b))
	return err
}

// MarshalText writes what ParseDisruptAt reads.
func (d DisruptAt) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// DefaultReadyWait is how long a shard waits for the others to be ready
// when the plan names no ReadyWait: pods are scheduled, pull the image and
// boot their fleets in that time.
const DefaultReadyWait = 15 * time.Minute

// SliceSize is how many devices this process's fleet runs: its shard's, or
// the whole fleet's.
func (f Fleet) SliceSize() int { return f.Shard.Size(f.Devices) }

// Shared is what every shard of one storm must agree on, one "name=value"
// a setting, in a fixed order: the fleet (but which shard), the storm and
// the broker, and the time scale. Two shards whose Shared differ ran
// different storms, and their reports must not be merged.
func (p Plan) Shared() []string {
	var out []string
	add := func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			name := t.Field(i).Name
			if name == "Shard" || name == "ReadyDir" || name == "ReadyWait" {
				continue // which slice, and where it meets the others, are the shard's own
			}
			out = append(out, fmt.Sprintf("%s=%s", prefix+name, shown(v.Field(i))))
		}
	}
	add("", reflect.ValueOf(p.Fleet))
	add("", reflect.ValueOf(p.Storm))
	add("", reflect.ValueOf(p.Target))
	out = append(out, fmt.Sprintf("Shards=%d", p.Shard.Count), fmt.Sprintf("TimeScale=%g", p.TimeScale))
	return out
}

// shown writes a setting for Shared: pointers by what they point to.
func shown(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "<nil>"
		}
		return shown(v.Elem())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = shown(v.Index(i))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Struct:
		if s, ok := v.Interface().(fmt.Stringer); ok {
			return s.String()
		}
		parts := make([]string, v.NumField())
		for i := range parts {
			parts[i] = v.Type().Field(i).Name + ":" + shown(v.Field(i))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return fmt.Sprint(v.Interface())
}
