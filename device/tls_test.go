package device_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
)

// oldTLS is what a server stuck on TLS 1.0 and 1.1 offers, or someone on
// the path who has forced a downgrade.
func oldTLS(t *testing.T, p *pki) *tls.Config {
	c, err := p.ca.Issue("old server", x509.ExtKeyUsageServerAuth)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
}

// handshake is what a TLS server saw of one connection.
type handshake struct {
	err  error
	read int64 // bytes of MQTT after the handshake
}

// A caller's tls.Config that allows TLS 1.0 does not make the agent speak
// it: against a broker that offers only 1.0 and 1.1, the handshake fails
// and not one byte of the CONNECT, password and all, is sent. The caller's
// config is left as it was.
func TestTheAgentNeverSpeaksTLSBelow12(t *testing.T) {
	p := newPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	serverTLS := oldTLS(t, p)
	seen := make(chan handshake, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			seen <- handshake{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(bound))
		tc := tls.Server(c, serverTLS)
		if err := tc.Handshake(); err != nil {
			seen <- handshake{err: err}
			return
		}
		n, _ := io.Copy(io.Discard, io.LimitReader(tc, 1)) // the CONNECT's first byte would do
		seen <- handshake{read: n}
	}()

	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	weak := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10}
	tm := device.DefaultTiming()
	tm.BootSpread = time.Millisecond
	events := make(chan device.Event, 100)
	a, err := device.New(device.Config{Broker: "ssl://" + ln.Addr().String(), ClientID: "dev-1", Username: "u", Password: "s3cret",
		TLS: weak, Timing: &tm, OnEvent: func(e device.Event) { events <- e }})
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	var failed device.Event
	for failed.Kind != device.EventAttemptFailed {
		select {
		case failed = <-events:
		case <-time.After(bound):
			t.Fatal("no attempt failed")
		}
	}
	require.NoError(t, a.Stop(context.Background()))

	var got handshake
	select {
	case got = <-seen:
	case <-time.After(bound):
		t.Fatal("the broker never saw the device")
	}
	require.Error(t, got.err, "no TLS 1.1 session was set up")
	assert.ErrorContains(t, got.err, "offered only unsupported versions", "the device offered 1.2 and 1.3")
	assert.Zero(t, got.read)
	assert.ErrorContains(t, failed.Err, "protocol version", "the device says why")
	assert.Equal(t, uint16(tls.VersionTLS10), weak.MinVersion, "the caller's config is not changed")
}

// What no tls.Config can make the agent or the fetcher do: skip verifying
// the server, or cap TLS below 1.2.
func TestATLSConfigCannotWeakenTheAgent(t *testing.T) {
	for name, cfg := range map[string]*tls.Config{
		"skip verify":  {InsecureSkipVerify: true},
		"at most 1.1":  {MaxVersion: tls.VersionTLS11},
		"only TLS 1.0": {MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10},
	} {
		_, err := device.New(device.Config{Broker: "ssl://b:8883", ClientID: "x", TLS: cfg})
		assert.ErrorIs(t, err, device.ErrInvalid, name)
		_, err = device.NewFetcher(device.FetcherConfig{URL: "https://b/config", TLS: cfg})
		assert.ErrorIs(t, err, device.ErrInvalid, name)
		tr := &http.Transport{TLSClientConfig: cfg}
		_, err = device.NewFetcher(device.FetcherConfig{URL: "https://b/config", Client: &http.Client{Transport: tr}})
		assert.ErrorIs(t, err, device.ErrInvalid, "the fetcher's Client: "+name)
	}
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
	err, _ := fetchOnce(t, device.FetcherConfig{URL: srv.URL, Client: &http.Client{Transport: weak}})
	assert.ErrorContains(t, err, "protocol version")
	assert.Zero(t, hits.Load(), "no request went over TLS 1.1")
	assert.Equal(t, uint16(tls.VersionTLS10), weak.TLSClientConfig.MinVersion, "the caller's transport is not changed")

	hidden := &roundTripper{weak}
	err, events := fetchOnce(t, device.FetcherConfig{URL: srv.URL, Client: &http.Client{Transport: hidden}})
	require.ErrorIs(t, err, device.ErrWeakTLS)
	assert.ErrorContains(t, err, "TLS 1.1")
	require.Len(t, events, 1)
	assert.Equal(t, device.EventConfigRejected, events[0].Kind, "nothing applied")

	good := p.server(t, false, serveDoc(&hits))
	unverified := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(unverified.CloseIdleConnections)
	err, _ = fetchOnce(t, device.FetcherConfig{URL: good.URL, Client: &http.Client{Transport: &roundTripper{unverified}}})
	require.ErrorIs(t, err, device.ErrWeakTLS)
	assert.ErrorContains(t, err, "not verified")
	assert.False(t, errors.Is(err, device.ErrConfigInvalid))

	// A RoundTripper that answers an https URL over plain http.
	plain := httptest.NewServer(serveDoc(&hits))
	t.Cleanup(plain.Close)
	downgrade := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = "http", plain.Listener.Addr().String()
		return http.DefaultTransport.RoundTrip(r)
	})
	err, _ = fetchOnce(t, device.FetcherConfig{URL: good.URL, Client: &http.Client{Transport: downgrade}})
	require.ErrorIs(t, err, device.ErrWeakTLS)
	assert.ErrorContains(t, err, "without TLS state")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
