package faultproxy

import (
	"bytes"
	"encoding/binary"
)

// maxUpgrade bounds the HTTP request that opens MQTT over WebSocket: a
// browser's is under 2 KiB.
const maxUpgrade = 8 << 10

// sniffConnect reads the client ID and protocol level from a device's
// first bytes: a CONNECT in the clear, as MQTT over TCP sends it or as the
// first frame of MQTT over WebSocket (after the HTTP upgrade) carries it.
// more says the bytes so far are the start of one of those, cut short:
// the caller may read on. TLS, or anything else, is neither.
func sniffConnect(head []byte) (id string, level byte, ok, more bool) {
	switch {
	case len(head) == 0:
		return "", 0, false, true
	case head[0] == 0x10:
		id, level, ok = parseConnect(head)
		return id, level, ok, !ok && len(head) < MaxHeldBytes
	case bytes.HasPrefix(head, []byte("GET ")) || bytes.HasPrefix([]byte("GET "), head):
		return sniffWebSocket(head)
	}
	return "", 0, false, false
}

// sniffWebSocket reads the CONNECT in the first WebSocket frame after an
// HTTP upgrade request. A client's frames are masked (RFC 6455 5.3).
func sniffWebSocket(head []byte) (id string, level byte, ok, more bool) {
	end := bytes.Index(head, []byte("\r\n\r\n"))
	if end < 0 {
		return "", 0, false, len(head) < maxUpgrade
	}
	frame := head[end+4:]
	if len(frame) < 2 {
		return "", 0, false, true
	}
	if op := frame[0] & 0x0f; op != 2 && op != 0 { // binary, or its continuation
		return "", 0, false, false
	}
	n, at := int(frame[1]&0x7f), 2
	switch n {
	case 126:
		if len(frame) < 4 {
			return "", 0, false, true
		}
		n, at = int(binary.BigEndian.Uint16(frame[2:])), 4
	case 127:
		if len(frame) < 10 {
			return "", 0, false, true
		}
		v := binary.BigEndian.Uint64(frame[2:])
		if v > MaxHeldBytes {
			return "", 0, false, false
		}
		n, at = int(v), 10
	}
	var mask []byte
	if frame[1]&0x80 != 0 {
		if len(frame) < at+4 {
			return "", 0, false, true
		}
		mask, at = frame[at:at+4], at+4
	}
	if n > MaxHeldBytes {
		return "", 0, false, false
	}
	if len(frame) < at+n {
		return "", 0, false, len(head) < MaxHeldBytes
	}
	payload := append([]byte(nil), frame[at:at+n]...)
	for i := range payload {
		if mask != nil {
			payload[i] ^= mask[i%4]
		}
	}
	id, level, ok = parseConnect(payload)
	return id, level, ok, false
}
