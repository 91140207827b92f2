package proxystorm

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// The control API, as toxiproxy's is to its proxies: plain JSON over HTTP,
// a resource a thing. docs/proxy.md has a session of it, and
// docs/proxy-api.schema.json each body.
//
//	GET    /status             where the storm is, and the live counts
//	POST   /disruptions        begin a disruption now (a Disruption)
//	DELETE /disruptions/open   end the one begun with no outage
//	POST   /finish             stop watching: the report is written
//	GET    /report             report.json, once written
//
// Bodies are strict: one JSON object of at most maxBody bytes, no unknown
// key, no key twice. An error is {"error": "..."} with its status.

// maxBody bounds a request's body: a disruption is a few dozen bytes.
const maxBody = 16 << 10

// Disruption is POST /disruptions' body: what to break, where, and for how
// long. Durations are Go's ("30s", "1m30s"); an outage of "" or "0s" lasts
// until DELETE /disruptions/open.
type Disruption struct {
	Scenario      plan.Scenario `json:"scenario"`
	Outage        string        `json:"outage,omitempty"`
	Node          *int          `json:"node,omitempty"`
	Flap          string        `json:"flap,omitempty"`
	Latency       string        `json:"latency,omitempty"`
	LatencyJitter string        `json:"latency_jitter,omitempty"`
}

// Status is GET /status: where the storm is and what the proxies see now.
type Status struct {
	State    State  `json:"state"`
	Sessions int    `json:"sessions"`
	Nodes    []Node `json:"nodes"`
	// Devices is the fleet when the storm began (0 before), Back those of
	// them with a session now.
	Devices     int         `json:"devices"`
	Back        int         `json:"back"`
	Disruptions []Struck    `json:"disruptions"`
	Open        *Disruption `json:"open"`
	// Report is where report.json was written, once it was.
	Report string `json:"report,omitempty"`
}

// Node is one broker node and its proxy, live.
type Node struct {
	Listen   string             `json:"listen"`
	Broker   string             `json:"broker"`
	Sessions int                `json:"sessions"`
	Counts   report.ProxyCounts `json:"counts"`
}

// Struck is a disruption made: when, and what.
type Struck struct {
	At       time.Time     `json:"at"`
	OffsetS  float64       `json:"offset_s"`
	Scenario plan.Scenario `json:"scenario"`
	Node     *int          `json:"node,omitempty"`
}

// Status is the storm now.
func (s *Storm) Status() Status {
	st := Status{Sessions: s.Sessions(), Disruptions: []Struck{}}
	for k, p := range s.proxies {
		k2 := p.Recorder().Counts()
		broker := "in process"
		if k < len(s.cfg.Brokers) {
			broker = s.cfg.Brokers[k]
		}
		st.Nodes = append(st.Nodes, Node{Listen: p.Addr(), Broker: broker, Sessions: p.Recorder().Sessions(),
			Counts: report.ProxyCounts{Admitted: k2.Accepted, Answered: p.Recorder().Answered(), Refused: k2.Refused,
				Throttled: k2.Throttled, Dropped: k2.Dropped, Unreachable: k2.Unreachable, Overflowed: k2.Overflowed}})
	}
	s.mu.Lock()
	st.State = s.state
	fl := s.fleet
	for _, x := range s.strikes {
		st.Disruptions = append(st.Disruptions, Struck{At: x.at.UTC(), OffsetS: x.at.Sub(s.t0).Seconds(), Scenario: x.event.Scenario,
			Node: x.event.Node})
	}
	if s.open != nil {
		st.Open = &Disruption{Scenario: s.open.event.Scenario, Node: s.open.event.Node}
	}
	st.Report = s.written
	s.mu.Unlock()
	if fl != nil {
		open, anonymous := s.openSessions()
		st.Devices, st.Back = fl.devices(), min(anonymous, fl.anonymous)
		for _, id := range fl.ids {
			if open[id] {
				st.Back++
			}
		}
	}
	return st
}

// Wrote records where the report was written, for GET /report and the
// status.
func (s *Storm) Wrote(path string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written, s.reportJSON = path, body
}

// Handler is the control API. token, if not empty, is required as a bearer
// token on every request.
func (s *Storm) Handler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, s.Status()) })
	mux.HandleFunc("POST /disruptions", s.postDisruption)
	mux.HandleFunc("DELETE /disruptions/open", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.End(); err != nil {
			fail(w, http.StatusConflict, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /finish", func(w http.ResponseWriter, r *http.Request) {
		if err := emptyBody(r); err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		s.Finish()
		reply(w, http.StatusAccepted, s.Status())
	})
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		body := s.reportJSON
		s.mu.Unlock()
		if body == nil {
			fail(w, http.StatusConflict, errors.New("no report yet: the storm is "+string(s.Status().State)+"; POST /finish ends the watch"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	if token == "" {
		return mux
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="devicesim proxy"`)
			fail(w, http.StatusUnauthorized, errors.New("a bearer token is required: Authorization: Bearer TOKEN"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Storm) postDisruption(w http.ResponseWriter, r *http.Request) {
	var d Disruption
	if err := decodeStrict(r, &d); err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	e, err := d.event()
	if err == nil {
		err = s.Strike(e)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	reply(w, http.StatusCreated, s.Status())
}

// event is the disruption as a plan has it.
func (d Disruption) event() (plan.Event, error) {
	e := plan.Event{Scenario: d.Scenario, Node: d.Node}
	if _, err := plan.ParseScenario(string(d.Scenario)); err != nil {
		return e, fmt.Errorf("%w: scenario: %v", ErrInvalid, err)
	}
	for _, f := range []struct {
		name string
		v    string
		dst  *time.Duration
	}{{"outage", d.Outage, &e.Outage}, {"flap", d.Flap, &e.Flap}, {"latency", d.Latency, &e.Latency},
		{"latency_jitter", d.LatencyJitter, &e.LatencyJitter}} {
		if f.v == "" {
			continue
		}
		v, err := time.ParseDuration(f.v)
		if err != nil || v < 0 || v > plan.MaxDisruption {
			return e, fmt.Errorf("%w: %s %q: a duration such as 30s, within 0 and %v", ErrInvalid, f.name, f.v, plan.MaxDisruption)
		}
		*f.dst = v
	}
	return e, nil
}

// decodeStrict reads r's body into v: one JSON object, no unknown key, no
// key twice, nothing after it, at most maxBody bytes.
func decodeStrict(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		return err
	case len(body) > maxBody:
		return fmt.Errorf("a body of more than %d bytes", maxBody)
	case !strings.HasPrefix(strings.TrimSpace(string(body)), "{"):
		return errors.New("the body is one JSON object")
	}
	if err := noKeyTwice(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("something after the JSON object")
	}
	return nil
}

// noKeyTwice refuses an object with a key twice: encoding/json would take
// the last.
func noKeyTwice(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// emptyBody refuses a body where none is taken.
func emptyBody(r *http.Request) error {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1))
	if len(b) > 0 {
		return errors.New("this call takes no body")
	}
	return nil
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, status int, err error) {
	reply(w, status, map[string]string{"error": err.Error()})
}
