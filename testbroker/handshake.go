package testbroker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"
)

// ErrNoThreadCPU is returned by HandshakeCPU where the platform cannot read
// one thread's CPU time.
var ErrNoThreadCPU = errors.New("testbroker: per-thread CPU time is not available on this platform")

// ErrInvalid: every invalid input (a Config, a fault's duration, a refusal
// code, an Admission) is an error wrapping it; an Admission fault.Validate
// refuses wraps fault.ErrInvalid too.
var ErrInvalid = errors.New("testbroker: invalid input")

// HandshakeCPU measures the CPU time one TLS handshake costs the broker's
// side. It is the mean over n full handshakes, with no session resumption,
// as after a device's reboot or with no session cache. A device certificate
// is used when the broker asks for one. Each handshake runs over an
// in-memory pipe with the broker's half locked to one thread. That thread's
// CPU time is read before and after. The device's half and everything else
// the process does are thus not counted.
func (b *Broker) HandshakeCPU(n int) (time.Duration, error) {
	if b.pki == nil {
		return 0, errNotTLS
	}
	if n < 1 {
		return 0, fmt.Errorf("%w: HandshakeCPU needs n >= 1, got %d", ErrInvalid, n)
	}
	client, err := b.ClientTLSConfig("handshake-probe")
	if err != nil {
		return 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var total time.Duration
	for range n {
		dev, srv := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- tls.Client(dev, client).Handshake() }()
		before, err := threadCPU()
		if err != nil {
			dev.Close()
			srv.Close()
			<-done
			return 0, err
		}
		serr := tls.Server(srv, b.pki.serverConfig).Handshake()
		after, _ := threadCPU()
		total += after - before
		srv.Close()
		dev.Close()
		if cerr := <-done; serr != nil || cerr != nil {
			return 0, errors.Join(serr, cerr)
		}
	}
	return total / time.Duration(n), nil
}
