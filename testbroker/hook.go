package testbroker

import (
	"bytes"
	"errors"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/herdguard/herdguard/fault"
)

// hook is where the broker's faults meet mochi's connection lifecycle.
type hook struct {
	mqtt.HookBase
	b *Broker
}

func (h *hook) ID() string { return "herdguard-testbroker" }

func (h *hook) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck,
		mqtt.OnSessionEstablish, mqtt.OnSessionEstablished, mqtt.OnDisconnect, mqtt.OnPublish,
	}, []byte{b})
}

func (h *hook) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }
func (h *hook) OnACLCheck(*mqtt.Client, string, bool) bool              { return true }

func trackedOf(cl *mqtt.Client) *trackedConn {
	tc, _ := cl.Net.Conn.(*trackedConn)
	return tc
}

// OnConnect runs once the CONNECT packet is read: record it, apply latency,
// refusals and admission.
func (h *hook) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	b := h.b
	tc := trackedOf(cl)
	if tc == nil {
		return nil
	}
	id := cl.ID
	tc.id.Store(&id)
	now := time.Now()
	b.rec.connect(tc.seq, now, id, cl.Properties.ProtocolVersion)
	b.awaitPreviousSession(id, tc)

	if d := time.Duration(b.faults.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			return errors.New("testbroker: closed")
		}
	}
	if r, ok := b.faults.refusal(id); ok {
		return h.refuse(cl, tc, r)
	}
	if code := b.faults.busy.Load(); code > 0 {
		return h.refuse(cl, tc, overLimit(cl, byte(code)))
	}
	if ok, mode, code := b.faults.admitConnect(now); !ok {
		if mode == fault.RefuseOverLimit {
			return h.refuse(cl, tc, overLimit(cl, code))
		}
		tc.throt.Store(true) // fault.DisconnectOverLimit: CONNACK, then close
	}
	return nil
}

// overLimit is the refusal of a client over a limit: an MQTT 5 client's
// reason code, or CONNACK 3 for a 3.1.1 client, which has no such code.
func overLimit(cl *mqtt.Client, code byte) refusal {
	if cl.Properties.ProtocolVersion >= 5 {
		return refusal{code: ConnackCode(code)}
	}
	return refusal{code: RefuseServerUnavailable}
}

func (h *hook) refuse(cl *mqtt.Client, tc *trackedConn, r refusal) error {
	v5, ok := v5For[r.code]
	if !ok {
		v5 = packets.Code{Code: byte(r.code), Reason: "refused"}
	}
	h.b.rec.decide(tc.seq, fault.Refused, byte(r.code))
	var props *packets.Properties
	if r.reference != "" && cl.Properties.ProtocolVersion >= 5 {
		props = &packets.Properties{ServerReference: r.reference}
	}
	_ = h.b.srv.SendConnack(cl, v5, false, props)
	return v5
}

// OnSessionEstablish runs just before the CONNACK 0 is sent, so the record
// exists before the client can observe its success.
func (h *hook) OnSessionEstablish(cl *mqtt.Client, _ packets.Packet) {
	if tc := trackedOf(cl); tc != nil {
		tc.est.Store(true)
		h.b.sessions.Store(cl.ID, tc)
		outcome := fault.Accepted
		if tc.throt.Load() {
			outcome = fault.Throttled
		}
		h.b.rec.decide(tc.seq, outcome, 0)
	}
}

// OnSessionEstablished runs after the CONNACK: the time to throttle or to
// schedule a flap.
func (h *hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	b := h.b
	tc := trackedOf(cl)
	if tc == nil {
		return
	}
	if tc.throt.Load() {
		b.kick(cl, CauseThrottled)
		return
	}
	if d := time.Duration(b.faults.flapAfter.Load()); d > 0 {
		b.faults.afterFunc(d, func() {
			if !cl.Closed() {
				b.kick(cl, CauseFlap)
			}
		})
	}
}

func (h *hook) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
	tc := trackedOf(cl)
	d := Disconnect{Time: time.Now(), ClientID: cl.ID, Cause: CauseError}
	if err != nil {
		d.Err = err.Error()
	}
	switch {
	case tc != nil && tc.cause.Load() != nil:
		d.Cause = *tc.cause.Load()
	case cl.IsTakenOver():
		d.Cause = CauseTakeover
	case h.b.ctx.Err() != nil:
		d.Cause = CauseShutdown
	case errors.Is(cl.StopCause(), packets.CodeDisconnect) || errors.Is(err, packets.CodeDisconnect):
		d.Cause = CauseClient
	}
	h.b.rec.disconnect(d)
	if tc != nil {
		tc.markEnded()
	}
}

// OnPublish records a PUBLISH before mochi writes its PUBACK (OnPublished
// runs after it): a client that holds an acknowledgement must never find its
// message missing from the record.
func (h *hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Qos > 0 && h.b.faults.dropPublishes.Load() {
		h.b.rec.withheld()
		return pk, packets.ErrRejectPacket // mochi drops it: no PUBACK
	}
	p := Publish{Time: time.Now(), ClientID: cl.ID, Topic: pk.TopicName, QoS: pk.FixedHeader.Qos}
	if f := h.b.cfg.PayloadDigest; f != nil {
		p.Payload = f(pk.Payload)
	} else {
		p.Payload = append([]byte(nil), pk.Payload...)
	}
	h.b.rec.publish(p)
	if pk.FixedHeader.Qos > 0 {
		h.b.faults.awaitAck() // mochi writes the PUBACK when this returns
	}
	return pk, nil
}
