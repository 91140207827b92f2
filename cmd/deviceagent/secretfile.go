package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxSecretFile bounds what is read of -password-file (MQTT's password
// field holds at most 65,535 bytes) and of -key.
const maxSecretFile = 64 << 10

// errLink is openNoWait's refusal of a symbolic link.
var errLink = errors.New("is a symbolic link, which the agent does not follow: " +
	"name the file itself (in a Kubernetes secret volume, DIR/..data/NAME)")

// secretChecked, if set, runs between the check of a file readChecked
// reads and its read: a test replaces the file there.
var secretChecked func(path string)

// readSecret reads the secret file path, given as flagName, at most limit
// bytes. It reads from the descriptor it checked, so that what it checked
// is what it reads. It refuses a symbolic link, a file that is not a
// regular one, one that another user owns (whatever allowOpen says) and,
// unless allowOpen, one that group or others may read or write. Its errors
// name the flag, the file and its owner, never what the file holds.
func readSecret(flagName, path string, allowOpen bool, limit int) ([]byte, error) {
	return readChecked(flagName, path, limit, func(f *os.File) error { return privateSecret(flagName, f, allowOpen) })
}

// maxPublicFile bounds what is read of -ca and -cert: a chain of PEM
// certificates is a few KiB, a CA bundle a few hundred.
const maxPublicFile = 1 << 20

// readPublic reads a file whose content is public but whose integrity the
// agent trusts, -ca and -cert: a CA planted by another user would be
// trusted with every connection. It is refused as readSecret refuses a
// secret, but for being readable: a link, not a regular file (a FIFO is
// never waited on), another user's (root's is the agent's), or one that
// group or others may write.
func readPublic(flagName, path string) ([]byte, error) {
	return readChecked(flagName, path, maxPublicFile, func(f *os.File) error {
		fi, err := ownFile(flagName, f)
		if err == nil && fi.Mode().Perm()&0o022 != 0 {
			err = fmt.Errorf("%s %s is mode %04o: group or others may change it; chmod 644 it", flagName, f.Name(), fi.Mode().Perm())
		}
		return err
	})
}

// readChecked opens path without following a link or waiting, runs check
// on the descriptor, and reads at most limit bytes from that descriptor.
func readChecked(flagName, path string, limit int, check func(*os.File) error) ([]byte, error) {
	f, err := openNoWait(path)
	if errors.Is(err, errLink) {
		return nil, fmt.Errorf("%s %s %w", flagName, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	if err := check(f); err != nil {
		return nil, err
	}
	if secretChecked != nil {
		secretChecked(path)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s %s holds more than %d bytes", flagName, path, limit)
	}
	return b, nil
}

// ownFile refuses a file, as opened, that is not a regular file or that a
// user other than the agent's or root owns. Root's file is the agent's
// too: root can read the agent's memory anyway, and a file a Kubernetes
// secret volume mounts is root's. Another user's never is: its owner could
// rewrite it, or chmod it, at any time.
func ownFile(flagName string, f *os.File) (os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	uid, known := owner(fi)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s %s is not a regular file", flagName, f.Name())
	case known && uid != os.Geteuid() && uid != 0:
		return nil, fmt.Errorf("%s %s belongs to uid %d, not to this agent's uid %d (nor to root): its owner could change it; "+
			"chown it to the agent's user (-allow-open-secret-files allows open modes, never another owner)",
			flagName, f.Name(), uid, os.Geteuid())
	}
	return fi, nil
}

// privateSecret refuses a secret file, as opened, that is not the
// agent's own regular file (ownFile), and one that group or others may
// read or write unless allowOpen (then the caller logs it).
func privateSecret(flagName string, f *os.File, allowOpen bool) error {
	fi, err := ownFile(flagName, f)
	if err == nil && fi.Mode().Perm()&0o077 != 0 && !allowOpen {
		err = fmt.Errorf("%s %s is mode %04o: group or others may read it; chmod 600 it, or set -allow-open-secret-files",
			flagName, f.Name(), fi.Mode().Perm())
	}
	return err
}

// loadTLS is the agent's TLS: -ca's pool (the system's without one), and
// the device certificate of -cert and -key. Each file's bytes come from
// the descriptor its check was made on; nothing opens one again by its
// path.
func (o *options) loadTLS() (*tls.Config, error) {
	if o.ca == "" && o.cert == "" && o.key == "" {
		return nil, nil
	}
	if (o.cert == "") != (o.key == "") {
		return nil, errors.New("-cert and -key go together: a device certificate needs its key")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.ca != "" {
		pem, err := readPublic("-ca", o.ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s holds no PEM certificate", o.ca)
		}
	}
	if o.cert == "" {
		return cfg, nil
	}
	keyPEM, err := readSecret("-key", o.key, o.allowOpenSecrets, maxSecretFile)
	if err != nil {
		return nil, err
	}
	certPEM, err := readPublic("-cert", o.cert)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil { // tls's errors name what is wrong, never key material
		return nil, fmt.Errorf("-cert %s and -key %s: %w", o.cert, o.key, err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}
