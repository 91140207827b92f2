package wire

import (
	"errors"
	"net"
	"net/url"
	"time"

	"golang.org/x/sys/unix"
)

// epollDriver is a loop's own sockets on one epoll instance: non-blocking
// TCP, level-triggered, read into one buffer the loop shares. A connection
// costs its descriptor, the kernel's socket and nothing in user space but
// its device's fields. golang.org/x/sys (already a dependency) rather than
// gnet or nbio: see docs/wire.md for the three measured.
type epollDriver struct {
	epfd, wakefd int
	buf          []byte
	events       []unix.EpollEvent
	addrs        map[string]unix.Sockaddr // each endpoint's host, resolved once
	connecting   map[int32]bool           // the sockets whose connect has not completed
}

// readBuffer is what one read takes at most: far more than the CONNACKs,
// PINGRESPs and PUBACKs a broker sends a device at a time.
const readBuffer = 64 << 10

func newEpoll() (*epollDriver, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd), Pad: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return nil, err
	}
	return &epollDriver{epfd: epfd, wakefd: wakefd, buf: make([]byte, readBuffer), events: make([]unix.EpollEvent, 256),
		addrs: map[string]unix.Sockaddr{}, connecting: map[int32]bool{}}, nil
}

// dial opens a non-blocking socket and begins its connect. To a loopback
// broker, device i's socket is bound to 127.0.0.(1 + i%4), as the agents'
// (member.LoopbackDialer): a fleet's churn does not run one address pair
// out of ephemeral ports.
func (e *epollDriver) dial(place, dev int32, u *url.URL) (int32, error) {
	sa, err := e.resolve(u.Host)
	if err != nil {
		return noSock, err
	}
	family := unix.AF_INET
	if _, ok := sa.(*unix.SockaddrInet6); ok {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return noSock, err
	}
	fail := func(err error) (int32, error) {
		unix.Close(fd)
		return noSock, err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // as Go's net does
	if in4, ok := sa.(*unix.SockaddrInet4); ok && in4.Addr[0] == 127 {
		// the port is chosen at connect, for the whole address pair, not
		// at bind for the source address alone: four times the sockets
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, byte(1 + dev%4)}}); err != nil {
			return fail(err)
		}
	}
	if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return fail(err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLRDHUP, Fd: int32(fd), Pad: place}
	if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fail(err)
	}
	e.connecting[int32(fd)] = true
	return int32(fd), nil
}

// resolve is host's socket address, looked up once.
func (e *epollDriver) resolve(host string) (unix.Sockaddr, error) {
	if sa, ok := e.addrs[host]; ok {
		return sa, nil
	}
	a, err := net.ResolveTCPAddr("tcp", host)
	if err != nil {
		return nil, err
	}
	var sa unix.Sockaddr
	if ip4 := a.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: a.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		s := &unix.SockaddrInet6{Port: a.Port}
		copy(s.Addr[:], a.IP.To16())
		sa = s
	}
	e.addrs[host] = sa
	return sa, nil
}

var errShortWrite = errors.New("wire: the socket took part of a packet")

func (e *epollDriver) send(sock int32, b []byte) error {
	n, err := unix.Write(int(sock), b)
	switch {
	case err != nil:
		return err
	case n < len(b):
		return errShortWrite
	}
	return nil
}

func (e *epollDriver) close(sock int32) {
	delete(e.connecting, sock)
	unix.Close(int(sock)) // which takes it out of the epoll set
}

func (e *epollDriver) poll(timeout time.Duration, on func(event)) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	n, err := unix.EpollWait(e.epfd, e.events, ms)
	if err != nil { // EINTR: the loop polls again
		return
	}
	for _, ev := range e.events[:n] {
		sock := ev.Fd
		switch {
		case ev.Pad < 0: // the wake
			var b [8]byte
			_, _ = unix.Read(e.wakefd, b[:])
		case e.connecting[sock]:
			e.connected(ev, on)
		case ev.Events&unix.EPOLLIN != 0:
			n, err := unix.Read(int(sock), e.buf)
			switch {
			case n > 0:
				on(event{place: ev.Pad, sock: sock, kind: eventData, data: e.buf[:n]})
			case errors.Is(err, unix.EAGAIN):
			default: // the broker closed the connection, or it failed
				on(event{place: ev.Pad, sock: sock, kind: eventClosed})
			}
		default: // an error or hang-up with nothing left to read
			on(event{place: ev.Pad, sock: sock, kind: eventClosed})
		}
	}
}

// connected takes the end of a socket's connect: up, and from then on
// watched for reading; or failed.
func (e *epollDriver) connected(ev unix.EpollEvent, on func(event)) {
	sock := ev.Fd
	delete(e.connecting, sock)
	soErr, err := unix.GetsockoptInt(int(sock), unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil || soErr != 0 || ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		on(event{place: ev.Pad, sock: sock, kind: eventClosed})
		return
	}
	in := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: sock, Pad: ev.Pad}
	if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_MOD, int(sock), &in); err != nil {
		on(event{place: ev.Pad, sock: sock, kind: eventClosed})
		return
	}
	on(event{place: ev.Pad, sock: sock, kind: eventUp})
}

func (e *epollDriver) wake() {
	one := [8]byte{1}
	_, _ = unix.Write(e.wakefd, one[:])
}

func (e *epollDriver) shut() {
	unix.Close(e.wakefd)
	unix.Close(e.epfd)
}
