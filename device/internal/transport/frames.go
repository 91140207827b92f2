package transport

// headerCounter follows a stream of MQTT packets and tells each packet's
// type as its fixed header passes. The zero value is at a packet's start.
type headerCounter struct {
	typ     byte
	inLen   bool // reading the remaining length
	lenByte int
	length  int
	left    int // body bytes still to pass
}

// follow advances over b, calling header for each packet whose remaining
// length completes in it.
func (h *headerCounter) follow(b []byte, header func(typ byte)) {
	for i := 0; i < len(b); {
		switch {
		case h.left > 0:
			k := min(h.left, len(b)-i)
			h.left -= k
			i += k
		case !h.inLen:
			h.typ, h.inLen, h.lenByte, h.length = b[i]>>4, true, 0, 0
			i++
		default:
			d := b[i]
			i++
			h.length |= int(d&0x7f) << (7 * h.lenByte)
			h.lenByte++
			if d&0x80 != 0 && h.lenByte < 4 {
				continue
			}
			h.inLen, h.left = false, h.length
			header(h.typ)
		}
	}
}
