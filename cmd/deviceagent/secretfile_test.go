//go:build unix

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusal is the agent's refusal of args before anything connects: what
// parse, then newAgent, said (nil if neither refused; an agent connects
// only once started).
func refusal(t *testing.T, args []string) error {
	t.Helper()
	o, err := parse(args, noEnv, io.Discard)
	if err != nil {
		return err
	}
	_, _, err = newAgent(o, slog.New(slog.DiscardHandler))
	return err
}

// secretArgs are a run's arguments with the file path as the secret
// flagName names; -key's certificate and -password-file's content are
// good, so that nothing else refuses them.
func secretArgs(t *testing.T, flagName, path string) []string {
	t.Helper()
	args := []string{"-broker", "ssl://broker.example:8883", "-client-id", "a", flagName, path}
	secret := []byte("pw-SECRET-file\n")
	if flagName == "-key" {
		var cert []byte
		cert, secret = keyPair(t)
		args = append(args, "-cert", filepath.Join(t.TempDir(), "cert.pem"))
		require.NoError(t, os.WriteFile(args[len(args)-1], cert, 0o644))
	}
	require.NoError(t, os.WriteFile(path, secret, 0o600))
	return args
}

// keyPair is a self-signed device certificate and its key, in PEM.
func keyPair(t *testing.T) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
}

// assertNoFileContent checks that an error shows nothing of a secret file.
func assertNoFileContent(t *testing.T, err error) {
	t.Helper()
	assertNoSecret(t, "the error", err.Error())
	assert.NotContains(t, err.Error(), "PRIVATE KEY")
}

// A -key or -password-file of another user is refused, even at 0600 and
// even with -allow-open-secret-files: its owner could rewrite it. The
// error names the flag, the file and its owner, never what it holds.
func TestSecretFilesOfAnotherUserAreRefused(t *testing.T) {
	asRoot(t)
	for _, flagName := range []string{"-password-file", "-key"} {
		t.Run(flagName, func(t *testing.T) {
			theirs := filepath.Join(t.TempDir(), "secret")
			args := secretArgs(t, flagName, theirs)
			require.NoError(t, refusal(t, args), "the agent's own is taken")
			require.NoError(t, os.Chown(theirs, nobody, nobody))
			for _, allow := range [][]string{nil, {"-allow-open-secret-files"}} {
				err := refusal(t, append(args, allow...))
				require.Error(t, err, "%v", allow)
				assert.ErrorContains(t, err, flagName+" "+theirs+" belongs to uid 65534, not to this agent's uid 0", "%v", allow)
				assertNoFileContent(t, err)
			}
		})
	}
}

// A -key or -password-file that is a symbolic link is refused, even to the
// agent's own 0600 file: the link is what its directory's writers control.
func TestSecretFilesThatAreLinksAreNotFollowed(t *testing.T) {
	for _, flagName := range []string{"-password-file", "-key"} {
		t.Run(flagName, func(t *testing.T) {
			dir := t.TempDir()
			mine, link := filepath.Join(dir, "secret"), filepath.Join(dir, "link")
			args := secretArgs(t, flagName, mine)
			require.NoError(t, refusal(t, args), "the file itself is taken")
			require.NoError(t, os.Symlink(mine, link))
			args[slices.Index(args, mine)] = link
			err := refusal(t, args)
			require.Error(t, err)
			assert.ErrorContains(t, err, flagName+" "+link+" is a symbolic link, which the agent does not follow")
			assertNoFileContent(t, err)
		})
	}
}

// What the agent checked is what it reads: a file put in the secret's
// place after the check (as whoever may write its directory could) is not
// read, for -key or -password-file. The key is not read again by path.
func TestSecretFilesAreReadFromTheDescriptorChecked(t *testing.T) {
	t.Cleanup(func() { secretChecked = nil })
	for _, flagName := range []string{"-password-file", "-key"} {
		t.Run(flagName, func(t *testing.T) {
			dir := t.TempDir()
			path, other := filepath.Join(dir, "secret"), filepath.Join(dir, "other")
			args := secretArgs(t, flagName, path)
			checked, err := os.ReadFile(path)
			require.NoError(t, err)
			replacement := []byte("pw-other\n")
			if flagName == "-key" {
				_, replacement = keyPair(t) // another device's
			}
			require.NoError(t, os.WriteFile(other, replacement, 0o600))
			swapped := 0
			secretChecked = func(p string) {
				if p != path {
					return // -cert
				}
				require.NoError(t, os.Rename(other, path))
				swapped++
			}
			o, err := parse(args, noEnv, io.Discard)
			require.NoError(t, err)
			_, cfg, err := newAgent(o, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			require.Equal(t, 1, swapped, "the file was replaced after the check")
			if flagName == "-password-file" {
				assert.Equal(t, "pw-SECRET-file", o.password)
				return
			}
			want, err := tls.X509KeyPair(must(os.ReadFile(args[slices.Index(args, "-cert")+1])), checked)
			require.NoError(t, err)
			require.Len(t, cfg.TLS.Certificates, 1)
			assert.Equal(t, want.PrivateKey, cfg.TLS.Certificates[0].PrivateKey, "the key checked is the key used")
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// -ca and -cert are public, but the agent trusts what they say: a CA put
// there by another user would vouch for any broker. Each is read as a
// secret is, but for its readers: a FIFO is never waited on, and a link,
// another user's file or one group or others may change is refused.
func TestTrustedFilesAreTheAgentsOwn(t *testing.T) {
	for _, flagName := range []string{"-ca", "-cert"} {
		t.Run(flagName, func(t *testing.T) {
			dir := t.TempDir()
			cert, key := keyPair(t)
			keyFile := filepath.Join(dir, "key.pem")
			require.NoError(t, os.WriteFile(keyFile, key, 0o600))
			path := filepath.Join(dir, "cert.pem")
			args := []string{"-broker", "ssl://broker.example:8883", "-client-id", "a", "-cert", path, "-key", keyFile}
			if flagName == "-ca" {
				args = []string{"-broker", "ssl://broker.example:8883", "-client-id", "a", "-ca", path}
			}
			plant := func(f func()) {
				require.NoError(t, os.RemoveAll(path))
				f()
			}
			good := func() { require.NoError(t, os.WriteFile(path, cert, 0o644)) }
			plant(good)
			require.NoError(t, refusal(t, args), "the agent's own, 0644, is taken")

			plant(func() { require.NoError(t, syscall.Mkfifo(path, 0o644)) })
			assert.ErrorContains(t, refusal(t, args), flagName+" "+path+" is not a regular file", "a FIFO, not waited on")

			plant(func() { good(); require.NoError(t, os.Chmod(path, 0o666)) })
			assert.ErrorContains(t, refusal(t, args), "group or others may change it")

			other := filepath.Join(dir, "other.pem")
			require.NoError(t, os.WriteFile(other, cert, 0o644))
			plant(func() { require.NoError(t, os.Symlink(other, path)) })
			assert.ErrorContains(t, refusal(t, args), "is a symbolic link")

			if os.Geteuid() == 0 {
				plant(func() { good(); require.NoError(t, os.Chown(path, nobody, nobody)) })
				assert.ErrorContains(t, refusal(t, args), "belongs to uid 65534")
			}
		})
	}
}
