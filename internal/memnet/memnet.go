// Package memnet is an in-process network: a Listener whose Dial hands it
// one end of a net.Pipe. It needs no file descriptor, so 100,000 clients
// fit in one process. Nothing in it waits on the operating system, so it
// runs inside a testing/synctest bubble. A real socket's Accept is not a
// wait synctest can see.
package memnet

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
)

// Listener is an in-process net.Listener. It is safe for concurrent use;
// make one with Listen.
type Listener struct {
	addr   Addr
	conns  chan net.Conn
	done   chan struct{}
	closer sync.Once
}

// Addr is a Listener's address: its name, on the network "mem".
type Addr string

func (a Addr) Network() string { return "mem" }
func (a Addr) String() string  { return string(a) }

// Listen returns a Listener named addr.
func Listen(addr string) *Listener {
	return &Listener{addr: Addr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial, or returns net.ErrClosed after Close.
func (m *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; dials from then on are refused. It is idempotent.
func (m *Listener) Close() error {
	m.closer.Do(func() { close(m.done) })
	return nil
}

func (m *Listener) Addr() net.Addr { return m.addr }

// Refused is the error of a dial to addr when nothing listens there: it
// looks like a TCP connection refused to the client.
func Refused(addr string) error {
	return &net.OpError{Op: "dial", Net: "mem", Addr: Addr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// Dial connects to m, waiting (as a TCP SYN waits in a listen backlog)
// until it is accepted or ctx ends. A closed Listener refuses (Refused).
func (m *Listener) Dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case m.conns <- server:
		return client, nil
	case <-m.done:
		client.Close()
		server.Close()
		return nil, Refused(string(m.addr))
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, &net.OpError{Op: "dial", Net: "mem", Addr: m.addr, Err: ctx.Err()}
	}
}
