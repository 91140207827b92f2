package transport

import "strings"

// TopicMatches says whether an MQTT topic filter matches a topic name. The
// wildcard '+' is one level. '#' as the last level is that level and every
// one below. A filter that starts with a wildcard does not match a topic
// that starts with '$' (MQTT 3.1.1 4.7, MQTT 5 4.7).
func TopicMatches(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	for {
		f, fRest, fMore := strings.Cut(filter, "/")
		if f == "#" && !fMore {
			return true
		}
		t, tRest, tMore := strings.Cut(topic, "/")
		if f != "+" && f != t {
			return false
		}
		switch {
		case !fMore && !tMore:
			return true
		case !fMore:
			return false
		case !tMore:
			return fRest == "#" // "a/#" matches "a"
		}
		filter, topic = fRest, tRest
	}
}

// SharedFilter is the filter a shared subscription ("$share/group/filter")
// matches topics with.
func SharedFilter(filter string) string {
	if rest, ok := strings.CutPrefix(filter, "$share/"); ok {
		if _, f, ok := strings.Cut(rest, "/"); ok {
			return f
		}
	}
	return filter
}
