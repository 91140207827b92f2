package remoteconfig_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/certs"
	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/remoteconfig"
)

// pki is a private CA with its PEM files, as a fleet's own would be.
type pki struct {
	ca     certs.CA
	caFile string
	dir    string
}

func newPKI(t *testing.T) *pki {
	ca, err := certs.NewCA("fleet CA")
	require.NoError(t, err)
	p := &pki{ca: ca, dir: t.TempDir()}
	p.caFile = filepath.Join(p.dir, "ca.pem")
	require.NoError(t, certs.WriteCert(p.caFile, ca.Cert.Raw))
	return p
}

// device writes a device certificate and key and returns their files.
func (p *pki) device(t *testing.T, name string) (certFile, keyFile string) {
	c, err := p.ca.Issue(name, x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+".key")
	require.NoError(t, certs.WriteCert(certFile, c.Certificate[0]))
	require.NoError(t, certs.WriteKey(keyFile, c.PrivateKey))
	return certFile, keyFile
}

// server starts an https server with a certificate from the CA (for
// localhost and 127.0.0.1), asking for a device certificate if mutual.
func (p *pki) server(t *testing.T, mutual bool, h http.Handler) *httptest.Server {
	c, err := p.ca.Issue("config server", x509.ExtKeyUsageServerAuth)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
	if mutual {
		pool := x509.NewCertPool()
		pool.AddCert(p.ca.Cert)
		srv.TLS.ClientAuth, srv.TLS.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func serveDoc(hits *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(goodDoc))
	})
}

func redirectTo(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	})
}

// fetchOnce runs one round with no retries.
func fetchOnce(t *testing.T, cfg remoteconfig.Config) (error, []device.Event) {
	t.Helper()
	p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 0})
	require.NoError(t, err)
	var events []device.Event
	cfg.Retry.Policy, cfg.Clock, cfg.Source = p, fakeclock.New(t0), rand.NewPCG(5, 5)
	cfg.OnEvent = func(e device.Event) { events = append(events, e) }
	f, err := remoteconfig.New(cfg)
	require.NoError(t, err)
	err = f.Fetch(context.Background())
	if _, ok := f.Current(); ok {
		assert.NoError(t, err, "a config was applied")
	}
	return err, events
}

// A device takes its configuration only from the server it was pointed at,
// over https, authenticated by the fleet's own CA, with its own certificate
// where the server asks for one.
func TestConfigComesOnlyFromTheTrustedServer(t *testing.T) {
	p := newPKI(t)
	certFile, keyFile := p.device(t, "dev-1")
	trust, err := device.LoadTLS(p.caFile, certFile, keyFile)
	require.NoError(t, err)

	t.Run("mutual TLS with a private CA", func(t *testing.T) {
		var hits atomic.Int32
		srv := p.server(t, true, serveDoc(&hits))
		require.NoError(t, first(fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1", TLS: trust})))
		assert.Equal(t, int32(1), hits.Load())

		caOnly, err := device.LoadTLS(p.caFile, "", "")
		require.NoError(t, err)
		assert.Error(t, first(fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1", TLS: caOnly})),
			"no device certificate, no config")
		assert.Error(t, first(fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1"})),
			"the system pool does not know the fleet's CA")
		assert.Equal(t, int32(1), hits.Load())
	})

	t.Run("a 302 to plain http on another host is refused", func(t *testing.T) {
		var hits atomic.Int32
		plain := httptest.NewServer(serveDoc(&hits))
		t.Cleanup(plain.Close)
		to := strings.Replace(plain.URL, "127.0.0.1", "localhost", 1) + "/evil"
		srv := p.server(t, false, redirectTo(to))
		err, events := fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1", TLS: trust})
		require.ErrorIs(t, err, remoteconfig.ErrRedirectRefused)
		assert.Contains(t, err.Error(), "not https")
		assert.Zero(t, hits.Load(), "the http server was never asked")
		require.Len(t, events, 1)
		assert.Equal(t, device.EventConfigRejected, events[0].Kind)
	})

	t.Run("an https redirect to another host is refused", func(t *testing.T) {
		var hits atomic.Int32
		other := p.server(t, false, serveDoc(&hits)) // trusted certificate, another host
		to := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
		srv := p.server(t, false, redirectTo(to))
		err, _ := fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1", TLS: trust})
		require.ErrorIs(t, err, remoteconfig.ErrRedirectRefused)
		assert.Contains(t, err.Error(), "another host")
		assert.Zero(t, hits.Load())
	})

	t.Run("a redirect on the same host is followed", func(t *testing.T) {
		var hits atomic.Int32
		mux := http.NewServeMux()
		mux.Handle("/config/dev-1", redirectTo("/v2/config/dev-1"))
		mux.Handle("/v2/config/dev-1", serveDoc(&hits))
		srv := p.server(t, false, mux)
		require.NoError(t, first(fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1", TLS: trust})))
		assert.Equal(t, int32(1), hits.Load())
	})

	t.Run("plain http only when allowed", func(t *testing.T) {
		var hits atomic.Int32
		plain := httptest.NewServer(serveDoc(&hits))
		t.Cleanup(plain.Close)
		_, err := remoteconfig.New(remoteconfig.Config{URL: plain.URL + "/config/dev-1?token=s3cret"})
		require.ErrorIs(t, err, remoteconfig.ErrInvalid)
		assert.NotContains(t, err.Error(), "s3cret")
		require.NoError(t, first(fetchOnce(t, remoteconfig.Config{URL: plain.URL + "/config/dev-1", AllowPlaintext: true})))
		assert.Equal(t, int32(1), hits.Load())
	})

	t.Run("errors never quote the URL's token", func(t *testing.T) {
		srv := p.server(t, false, serveDoc(new(atomic.Int32)))
		// untrusted certificate
		err, _ := fetchOnce(t, remoteconfig.Config{URL: srv.URL + "/config/dev-1?token=s3cret"})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "s3cret")
	})
}

func first(err error, _ []device.Event) error { return err }

// What no tls.Config can make the fetcher do: skip verifying the server,
// or cap TLS below 1.2.
func TestATLSConfigCannotWeakenTheFetcher(t *testing.T) {
	for name, cfg := range map[string]*tls.Config{
		"skip verify":  {InsecureSkipVerify: true},
		"at most 1.1":  {MaxVersion: tls.VersionTLS11},
		"only TLS 1.0": {MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10},
	} {
		_, err := remoteconfig.New(remoteconfig.Config{URL: "https://b/config", TLS: cfg})
		assert.ErrorIs(t, err, remoteconfig.ErrInvalid, name)
		tr := &http.Transport{TLSClientConfig: cfg}
		_, err = remoteconfig.New(remoteconfig.Config{URL: "https://b/config", Client: &http.Client{Transport: tr}})
		assert.ErrorIs(t, err, remoteconfig.ErrInvalid, "the fetcher's Client: "+name)
	}
}

// oldTLS is what a server stuck on TLS 1.0 and 1.1 offers, or someone on
// the path who has forced a downgrade.
func oldTLS(t *testing.T, p *pki) *tls.Config {
	c, err := p.ca.Issue("old server", x509.ExtKeyUsageServerAuth)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
}

// roundTripper hides its transport from the fetcher.
type roundTripper struct{ http.RoundTripper }

// The fetcher holds its Client to the same rules: a transport that allows
// TLS 1.0 speaks 1.2 or fails, and a RoundTripper it cannot look into has
// its answer refused, unread, when it came over TLS 1.1 or from a server
// that was not verified.
func TestTheFetchersClientNeverTakesWeakTLS(t *testing.T) {
	p := newPKI(t)
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(serveDoc(&hits))
	srv.TLS = oldTLS(t, p)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)

	weak := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10}}
	t.Cleanup(weak.CloseIdleConnections)
	err, _ := fetchOnce(t, remoteconfig.Config{URL: srv.URL, Client: &http.Client{Transport: weak}})
	assert.ErrorContains(t, err, "protocol version")
	assert.Zero(t, hits.Load(), "no request went over TLS 1.1")
	assert.Equal(t, uint16(tls.VersionTLS10), weak.TLSClientConfig.MinVersion, "the caller's transport is not changed")

	hidden := &roundTripper{weak}
	err, events := fetchOnce(t, remoteconfig.Config{URL: srv.URL, Client: &http.Client{Transport: hidden}})
	require.ErrorIs(t, err, remoteconfig.ErrWeakTLS)
	assert.ErrorContains(t, err, "TLS 1.1")
	require.Len(t, events, 1)
	assert.Equal(t, device.EventConfigRejected, events[0].Kind, "nothing applied")

	good := p.server(t, false, serveDoc(&hits))
	unverified := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(unverified.CloseIdleConnections)
	err, _ = fetchOnce(t, remoteconfig.Config{URL: good.URL, Client: &http.Client{Transport: &roundTripper{unverified}}})
	require.ErrorIs(t, err, remoteconfig.ErrWeakTLS)
	assert.ErrorContains(t, err, "not verified")
	assert.False(t, errors.Is(err, remoteconfig.ErrBadDocument))

	// A RoundTripper that answers an https URL over plain http.
	plain := httptest.NewServer(serveDoc(&hits))
	t.Cleanup(plain.Close)
	downgrade := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = "http", plain.Listener.Addr().String()
		return http.DefaultTransport.RoundTrip(r)
	})
	err, _ = fetchOnce(t, remoteconfig.Config{URL: good.URL, Client: &http.Client{Transport: downgrade}})
	require.ErrorIs(t, err, remoteconfig.ErrWeakTLS)
	assert.ErrorContains(t, err, "without TLS state")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
