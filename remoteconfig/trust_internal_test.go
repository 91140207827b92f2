package remoteconfig

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedirectPolicy(t *testing.T) {
	req := func(raw string) *http.Request {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		return &http.Request{URL: u}
	}
	for _, c := range []struct {
		from, to string
		plain    bool
		ok       bool
	}{
		{"https://cfg.example/c", "https://cfg.example/v2/c", false, true},
		{"https://cfg.example/c", "https://CFG.example:443/c", false, true},
		{"https://cfg.example/c", "https://cfg.example:8443/c", false, false},
		{"https://cfg.example/c", "https://evil.example/c", false, false},
		{"https://cfg.example/c", "http://cfg.example/c", true, false}, // never a downgrade
		{"http://cfg.example/c", "https://cfg.example/c", true, true},  // the usual upgrade
		{"http://cfg.example/c", "http://cfg.example/v2", true, true},
		{"http://cfg.example:8080/c", "https://cfg.example/c", true, false},
	} {
		from, err := url.Parse(c.from)
		require.NoError(t, err)
		err = redirectPolicy(from, c.plain)(req(c.to), []*http.Request{req(c.from)})
		if c.ok {
			assert.NoError(t, err, "%s -> %s", c.from, c.to)
		} else {
			assert.ErrorIs(t, err, ErrRedirectRefused, "%s -> %s", c.from, c.to)
		}
	}
}
