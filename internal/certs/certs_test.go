package certs_test

import (
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/certs"
)

func newCA(t *testing.T) certs.CA {
	t.Helper()
	ca, err := certs.NewCA("test CA")
	require.NoError(t, err)
	return ca
}

// A CA written to files and read back issues device certificates that
// verify against it, named by the client ID.
func TestCAFromFilesIssuesVerifiableDeviceCertificates(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	require.NoError(t, certs.WriteCert(certFile, ca.Cert.Raw))
	require.NoError(t, certs.WriteKey(keyFile, ca.Key))
	loaded, err := certs.LoadCA(certFile, keyFile)
	require.NoError(t, err)
	dev, err := loaded.Issue("dev-42", x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	assert.Equal(t, "dev-42", dev.Leaf.Subject.CommonName)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	_, err = dev.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
}

func TestLoadCARefusesALeafCertificate(t *testing.T) {
	ca := newCA(t)
	leaf, err := ca.Issue("not-a-ca", x509.ExtKeyUsageServerAuth)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf.key")
	require.NoError(t, certs.WriteCert(certFile, leaf.Certificate[0]))
	require.NoError(t, certs.WriteKey(keyFile, leaf.PrivateKey))
	_, err = certs.LoadCA(certFile, keyFile)
	assert.ErrorContains(t, err, "not a CA certificate")
	_, err = certs.LoadCA(filepath.Join(dir, "missing.pem"), keyFile)
	assert.Error(t, err)
}
