package report

import (
	"fmt"
	"io"
	"strings"
)

// External is what a storm of someone else's fleet (devicesim proxy)
// knows of it beside its attempts: how its devices were told apart, and
// those never back.
type External struct {
	// ByClientID counts the devices known by their client ID; BySession
	// those known only as a session (under TLS nothing names them).
	ByClientID int `json:"by_client_id"`
	BySession  int `json:"by_session"`
	// Identified: the proxies read each refused attempt's CONNECT
	// (-identify), so every attempt carries its client ID.
	Identified bool `json:"identified"`
	// NeverBack names the devices with no session when the watch ended,
	// at most MaxNeverBack of them; NeverBackCount counts them all.
	NeverBack      []string `json:"never_back,omitempty"`
	NeverBackCount int      `json:"never_back_count"`
}

// MaxNeverBack is the most devices never back a report names.
const MaxNeverBack = 100

// writeExternal writes how the fleet's devices were told apart, and who
// never came back.
func (r *Report) writeExternal(w io.Writer) {
	x := r.External
	if x == nil {
		return
	}
	how := "by client ID"
	switch {
	case x.BySession > 0 && x.ByClientID == 0:
		how = "by session only (no CONNECT in the clear: TLS?)"
	case x.BySession > 0:
		how = fmt.Sprintf("%d by client ID, %d by session only", x.ByClientID, x.BySession)
	}
	refused := "refused attempts are counted, not named (-identify names them)"
	if x.Identified {
		refused = "refused attempts named too (-identify)"
	}
	fmt.Fprintf(w, "the fleet's devices: %s; %s\n", how, refused)
	if x.NeverBackCount > 0 {
		more := ""
		if x.NeverBackCount > len(x.NeverBack) {
			more = fmt.Sprintf(" and %d more", x.NeverBackCount-len(x.NeverBack))
		}
		named := strings.Join(x.NeverBack, ", ")
		if named == "" {
			named = "sessions with no client ID"
		}
		fmt.Fprintf(w, "never back (%d): %s%s\n", x.NeverBackCount, named, more)
	}
}
