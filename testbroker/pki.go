package testbroker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/herdguard/herdguard/internal/certs"
)

// pki is the broker's own certificate authority, made in-process at start.
type pki struct {
	ca           certs.CA
	caPEM        []byte
	pool         *x509.CertPool
	serverConfig *tls.Config
}

func newPKI(mutual bool) (*pki, error) {
	ca, err := certs.NewCA("herdguard testbroker CA")
	if err != nil {
		return nil, err
	}
	p := &pki{ca: ca, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}),
		pool: x509.NewCertPool()}
	p.pool.AddCert(ca.Cert)
	server, err := p.ca.Issue("localhost", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	p.serverConfig = &tls.Config{Certificates: []tls.Certificate{server}, MinVersion: tls.VersionTLS12}
	if mutual {
		p.serverConfig.ClientAuth = tls.RequireAndVerifyClientCert
		p.serverConfig.ClientCAs = p.pool
	}
	return p, nil
}

var errNotTLS = errors.New("testbroker: the broker's transport is not TLS")

// ClientTLSConfig returns a client configuration that trusts the broker's CA
// and, with MutualTLS, presents a certificate issued to clientID.
func (b *Broker) ClientTLSConfig(clientID string) (*tls.Config, error) {
	if b.pki == nil {
		return nil, errNotTLS
	}
	cfg := &tls.Config{RootCAs: b.pki.pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if b.cfg.MutualTLS {
		cert, err := b.ClientCertificate(clientID)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ClientCertificate issues a device certificate for clientID from the
// broker's CA.
func (b *Broker) ClientCertificate(clientID string) (tls.Certificate, error) {
	if b.pki == nil {
		return tls.Certificate{}, errNotTLS
	}
	return b.pki.ca.Issue(clientID, x509.ExtKeyUsageClientAuth)
}

// TLSFiles are PEM files a device binary can be pointed at. The zero TLSFiles
// names no file. It is a plain value, safe to share.
type TLSFiles struct{ CA, Cert, Key string }

// WriteClientFiles writes the CA certificate and, with MutualTLS, a device
// certificate and key for clientID into dir.
func (b *Broker) WriteClientFiles(dir, clientID string) (TLSFiles, error) {
	if b.pki == nil {
		return TLSFiles{}, errNotTLS
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(f.CA, b.pki.caPEM, 0o644); err != nil {
		return TLSFiles{}, err
	}
	if !b.cfg.MutualTLS {
		return f, nil
	}
	cert, err := b.ClientCertificate(clientID)
	if err != nil {
		return TLSFiles{}, err
	}
	f.Cert, f.Key, err = writePair(dir, clientID, cert)
	return f, err
}

// WriteServerFiles writes the CA certificate and the broker's own
// certificate (for localhost and 127.0.0.1) and key into dir: another
// broker (mosquitto, say) can serve TLS that this broker's devices trust.
func (b *Broker) WriteServerFiles(dir string) (TLSFiles, error) {
	if b.pki == nil {
		return TLSFiles{}, errNotTLS
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(f.CA, b.pki.caPEM, 0o644); err != nil {
		return TLSFiles{}, err
	}
	var err error
	f.Cert, f.Key, err = writePair(dir, "server", b.pki.serverConfig.Certificates[0])
	return f, err
}

// writePair writes cert and its key as dir/name.crt and dir/name.key.
func writePair(dir, name string, cert tls.Certificate) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := certs.WriteCert(certPath, cert.Certificate[0]); err != nil {
		return "", "", err
	}
	if err := certs.WriteKey(keyPath, cert.PrivateKey); err != nil {
		return "", "", fmt.Errorf("testbroker: write key: %w", err)
	}
	return certPath, keyPath, nil
}

// WriteCAFiles writes the CA's certificate and private key into dir (ca.pem,
// ca.key): whoever has them can issue certificates this broker accepts,
// as devicesim's child processes do for their devices.
func (b *Broker) WriteCAFiles(dir string) (TLSFiles, error) {
	if b.pki == nil {
		return TLSFiles{}, errNotTLS
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Key: filepath.Join(dir, "ca.key")}
	if err := os.WriteFile(f.CA, b.pki.caPEM, 0o644); err != nil {
		return TLSFiles{}, err
	}
	return f, certs.WriteKey(f.Key, b.pki.ca.Key)
}
