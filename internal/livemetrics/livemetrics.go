// Package livemetrics serves a running fleet's counts as Prometheus
// metrics, so that a long storm test (against a real broker, say) can be
// watched in Grafana as it happens. Each agent reports through
// device.Metrics, the small interface firmware exports its own counts
// through; this package, and the Prometheus client library with it, stays
// out of the firmware.
package livemetrics

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/herdguard/herdguard/device"
)

// Fleet counts a fleet's attempts and sessions. It is safe for concurrent
// use by every agent of the fleet; create one with NewFleet.
type Fleet struct {
	reg       *prometheus.Registry
	devices   atomic.Int64
	connected atomic.Int64
	recovered atomic.Int64
	disrupted atomic.Int64 // unix nanoseconds of the last disruption, 0 before
	back      atomic.Pointer[[]atomic.Bool]
	attempts  [4]prometheus.Counter // by device.AttemptOutcome
	lost      prometheus.Counter
	tooLarge  prometheus.Counter
}

// NewFleet registers the fleet's metrics in a registry of their own.
func NewFleet() *Fleet {
	f := &Fleet{reg: prometheus.NewRegistry()}
	empty := []atomic.Bool{}
	f.back.Store(&empty)
	gauge := func(name, help string, v func() float64) {
		f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	gauge("herdguard_devices", "Devices in the fleet.", func() float64 { return float64(f.devices.Load()) })
	gauge("herdguard_devices_connected", "Devices with a session now.", func() float64 { return float64(f.connected.Load()) })
	gauge("herdguard_devices_recovered", "Devices that have had a session since the last disruption (all of them before one).",
		func() float64 { return float64(f.recovered.Load()) })
	gauge("herdguard_disruption_timestamp_seconds", "When the last disruption began (Unix time; 0 before any).",
		func() float64 { return float64(f.disrupted.Load()) / 1e9 })
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herdguard_connect_attempts_total",
		Help: "Connect attempts by outcome: accepted (CONNACK 0), refused (another CONNACK code), failed (no CONNACK: a refused dial, a timeout, a reset), protocol-error (a CONNACK or SUBACK that breaks MQTT 3.1.1)."},
		[]string{"outcome"})
	for o := device.AttemptAccepted; o <= device.AttemptProtocolError; o++ {
		f.attempts[o] = attempts.WithLabelValues(o.String())
	}
	f.lost = prometheus.NewCounter(prometheus.CounterOpts{Name: "herdguard_sessions_lost_total", Help: "Sessions lost (the connection failed or the broker ended it; not an agent stopped)."})
	f.tooLarge = prometheus.NewCounter(prometheus.CounterOpts{Name: "herdguard_packets_too_large_total",
		Help: "Connections a device closed because an incoming packet declared more than its limit (device.Config.Incoming.MaxPacket)."})
	f.reg.MustRegister(attempts, f.lost, f.tooLarge)
	return f
}

// Start begins a run of n devices: every count of devices starts again.
func (f *Fleet) Start(n int) {
	back := make([]atomic.Bool, n)
	f.back.Store(&back)
	f.devices.Store(int64(n))
	f.connected.Store(0)
	f.recovered.Store(0)
	f.disrupted.Store(0)
}

// Disrupted marks the disruption at t: recovery counts again from zero.
func (f *Fleet) Disrupted(t time.Time) {
	back := make([]atomic.Bool, len(*f.back.Load()))
	f.back.Store(&back)
	f.recovered.Store(0)
	f.disrupted.Store(t.UnixNano())
}

// Device is device i's device.Metrics.
func (f *Fleet) Device(i int) device.Metrics { return member{f, i} }

type member struct {
	f *Fleet
	i int
}

func (m member) Attempt(o device.AttemptOutcome) {
	if int(o) < len(m.f.attempts) {
		m.f.attempts[o].Inc()
	}
}

func (m member) SessionDown(lost bool) {
	m.f.connected.Add(-1)
	if lost {
		m.f.lost.Inc()
	}
}

func (m member) PacketTooLarge() { m.f.tooLarge.Inc() }

func (m member) SessionUp() {
	f := m.f
	f.connected.Add(1)
	if back := *f.back.Load(); m.i >= 0 && m.i < len(back) && !back[m.i].Swap(true) {
		f.recovered.Add(1)
	}
}

// Handler serves the metrics in Prometheus' text format.
func (f *Fleet) Handler() http.Handler {
	return promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{Registry: f.reg})
}

// Serve serves /metrics on addr (which may name port 0) and returns the
// address it listens on, and stop, which shuts the server down and waits
// for it.
func (f *Fleet) Serve(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", f.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed at stop
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return ln.Addr().String(), stop, nil
}
