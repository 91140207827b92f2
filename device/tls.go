package device

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// LoadTLS builds a client TLS configuration from PEM files: caFile (the CA
// pool that signs the broker; empty means the system pool) and, for mutual
// TLS, the device's certFile and keyFile (both or neither).
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("device: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("device: CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("device: a device certificate needs both the certificate and the key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("device: device certificate: %w", err) // names files, never key material
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// strictTLS returns cfg with TLS 1.2 as its floor: cfg itself if it has
// it, else a clone raised to it (the caller's config is not changed). It
// refuses a config that skips verifying the server, or that caps the
// version below 1.2: TLS 1.0 and 1.1 have no cipher a device should send
// a password over.
func strictTLS(field string, cfg *tls.Config) (*tls.Config, error) {
	switch {
	case cfg == nil:
		return nil, nil
	case cfg.InsecureSkipVerify:
		return nil, fmt.Errorf("%w: %s skips verifying the server: anyone on the path could stand in for it", ErrInvalid, field)
	case cfg.MaxVersion != 0 && cfg.MaxVersion < tls.VersionTLS12:
		return nil, fmt.Errorf("%w: %s allows nothing above %s: the agent speaks TLS 1.2 and up", ErrInvalid, field, tls.VersionName(cfg.MaxVersion))
	case cfg.MinVersion >= tls.VersionTLS12:
		return cfg, nil
	}
	raised := cfg.Clone()
	raised.MinVersion = tls.VersionTLS12
	return raised, nil
}

// strictClient returns c, or a copy of it whose transport speaks TLS 1.2
// or later, when c's *http.Transport allowed less; it refuses one that
// skips verifying the server. Another RoundTripper cannot be looked into:
// checkConnection refuses its weak connections as they answer.
func strictClient(c *http.Client) (*http.Client, error) {
	if c == nil {
		return nil, nil
	}
	tr, ok := c.Transport.(*http.Transport)
	if !ok || tr.TLSClientConfig == nil {
		return c, nil // http.DefaultTransport's TLS, or a RoundTripper's own
	}
	cfg, err := strictTLS("FetcherConfig.Client's TLS", tr.TLSClientConfig)
	if err != nil || cfg == tr.TLSClientConfig {
		return c, err
	}
	tr = tr.Clone()
	tr.TLSClientConfig = cfg
	copied := *c
	copied.Transport = tr
	return &copied, nil
}

// checkConnection refuses an answer that came over TLS older than 1.2,
// from a server that was not verified, or with no TLS state at all when
// the URL is https (a redirect from it goes only to https: a RoundTripper
// must be hiding it). The request has gone out by then: this keeps what
// came back from being used, and a RoundTripper that weakens TLS should
// not be given a URL with a token.
func checkConnection(cs *tls.ConnectionState, https bool) error {
	switch {
	case cs == nil && https:
		return fmt.Errorf("%w: an https answer without TLS state", ErrWeakTLS)
	case cs == nil:
		return nil // plain http, which NewFetcher allowed
	case cs.Version < tls.VersionTLS12:
		return fmt.Errorf("%w: the config server spoke %s", ErrWeakTLS, tls.VersionName(cs.Version))
	case len(cs.VerifiedChains) == 0:
		return fmt.Errorf("%w: the config server's certificate was not verified", ErrWeakTLS)
	}
	return nil
}
