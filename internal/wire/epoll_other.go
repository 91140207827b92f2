//go:build !linux

package wire

import "errors"

// newEpoll has no epoll to use: a fleet off Linux runs on net.Conns.
func newEpoll() (driver, error) { return nil, errors.New("wire: own sockets need Linux's epoll") }
