//go:build linux

package testbroker

import (
	"io"
	"net"
	"syscall"
)

// reservePort holds addr's port during an outage with a socket that is
// bound but not listening. Connects to it are still refused (RST). No other
// socket, nor a client's ephemeral source port, can take the port
// meanwhile. The broker thus comes back on the same address.
func reservePort(addr string) (io.Closer, error) {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	var sa syscall.Sockaddr
	family := syscall.AF_INET
	if ip4 := a.IP.To4(); ip4 != nil {
		s := &syscall.SockaddrInet4{Port: a.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		family = syscall.AF_INET6
		s := &syscall.SockaddrInet6{Port: a.Port}
		copy(s.Addr[:], a.IP.To16())
		sa = s
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// SO_REUSEADDR on both sides lets the listener bind again while this
	// socket still holds the port: no window without an owner.
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return fdCloser(fd), nil
}

type fdCloser int

func (f fdCloser) Close() error { return syscall.Close(int(f)) }
