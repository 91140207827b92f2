package device_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/certs"
)

// oldTLS is what a server stuck on TLS 1.0 and 1.1 offers, or someone on
// the path who has forced a downgrade.
func oldTLS(t *testing.T, ca certs.CA) *tls.Config {
	c, err := ca.Issue("old server", x509.ExtKeyUsageServerAuth)
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
	ca, err := certs.NewCA("fleet CA")
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	serverTLS := oldTLS(t, ca)
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
	pool.AddCert(ca.Cert)
	weak := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10}
	tm := device.DefaultTiming()
	tm.BootSpread = time.Millisecond
	events := make(chan device.Event, 100)
	a, err := device.New(device.Config{Broker: "ssl://" + ln.Addr().String(), ClientID: "dev-1", Credentials: device.Credentials{Username: "u", Password: "s3cret"},
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

// What no tls.Config can make the agent do: skip verifying the server, or
// cap TLS below 1.2.
func TestATLSConfigCannotWeakenTheAgent(t *testing.T) {
	for name, cfg := range map[string]*tls.Config{
		"skip verify":  {InsecureSkipVerify: true},
		"at most 1.1":  {MaxVersion: tls.VersionTLS11},
		"only TLS 1.0": {MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10},
	} {
		_, err := device.New(device.Config{Broker: "ssl://b:8883", ClientID: "x", TLS: cfg})
		assert.ErrorIs(t, err, device.ErrInvalid, name)
	}
}
