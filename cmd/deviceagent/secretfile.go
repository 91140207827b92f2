package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/herdguard/herdguard/device"
)

// maxSecretFile bounds what is read of -password-file (MQTT's password
// field holds at most 65,535 bytes) and of -key.
const maxSecretFile = 64 << 10

// errLink is openNoWait's refusal of a symbolic link.
var errLink = errors.New("is a symbolic link, which the agent does not follow: " +
	"name the file itself (in a Kubernetes secret volume, DIR/..data/NAME)")

// secretChecked, if set, runs between readSecret's check of a file and
// its read: a test replaces the file there.
var secretChecked func(path string)

// readSecret reads the secret file path, given as flagName, at most limit
// bytes. It reads from the descriptor it checked, so that what it checked
// is what it reads. It refuses a symbolic link, a file that is not a
// regular one, one that another user owns (whatever allowOpen says) and,
// unless allowOpen, one that group or others may read or write. Its errors
// name the flag, the file and its owner, never what the file holds.
func readSecret(flagName, path string, allowOpen bool, limit int) ([]byte, error) {
	f, err := openNoWait(path)
	if errors.Is(err, errLink) {
		return nil, fmt.Errorf("%s %s %w", flagName, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	if err := privateSecret(flagName, f, allowOpen); err != nil {
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

// privateSecret refuses a secret file, as opened, that is not a regular
// file or that another user owns, and one that group or others may read
// or write unless allowOpen (then the caller logs it). Root's file is the
// agent's too: root can read the agent's memory anyway, and a file a
// Kubernetes secret volume mounts is root's. Another user's never is: its
// owner could rewrite it, or chmod it, at any time.
func privateSecret(flagName string, f *os.File, allowOpen bool) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	uid, known := owner(fi)
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %s is not a regular file", flagName, f.Name())
	case known && uid != os.Geteuid() && uid != 0:
		return fmt.Errorf("%s %s belongs to uid %d, not to this agent's uid %d (nor to root): its owner could change it; "+
			"chown it to the agent's user (-allow-open-secret-files allows open modes, never another owner)",
			flagName, f.Name(), uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0 && !allowOpen:
		return fmt.Errorf("%s %s is mode %04o: group or others may read it; chmod 600 it, or set -allow-open-secret-files",
			flagName, f.Name(), fi.Mode().Perm())
	}
	return nil
}

// loadTLS is the agent's TLS: -ca's pool (the system's without one), and
// the device certificate of -cert and -key. The key's bytes come from the
// descriptor readSecret checked; nothing opens -key again by its path.
func (o *options) loadTLS() (*tls.Config, error) {
	if o.ca == "" && o.cert == "" && o.key == "" {
		return nil, nil
	}
	var keyPEM []byte
	if o.key != "" {
		var err error
		if keyPEM, err = readSecret("-key", o.key, o.allowOpenSecrets, maxSecretFile); err != nil {
			return nil, err
		}
	}
	if (o.cert == "") != (o.key == "") {
		return nil, errors.New("-cert and -key go together: a device certificate needs its key")
	}
	trust, err := device.LoadTLS(o.ca, "", "")
	if err != nil || o.cert == "" {
		return trust, err
	}
	certPEM, err := os.ReadFile(o.cert)
	if err != nil {
		return nil, fmt.Errorf("-cert: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil { // tls's errors name what is wrong, never key material
		return nil, fmt.Errorf("-cert %s and -key %s: %w", o.cert, o.key, err)
	}
	trust.Certificates = []tls.Certificate{cert}
	return trust, nil
}
