// Command pahogofleet runs a fleet of paho.mqtt.golang v1.5.1 clients, each
// with the library's own reconnect, for package thirdparty (StartPahoGo runs
// it with go run). Its one argument is a thirdparty.Spec as JSON. It writes
// "connected ID" at each CONNACK 0 and "lost ID" at each session's end, and
// disconnects and exits when its stdin closes.
//
// Its own reconnect (AutoReconnect, MaxReconnectInterval 10 min), from
// client.go reconnect and backoff.go: after a loss, the "connectionLost"
// sleep is 0 (skipFirst, unless the previous loss was within 6 s plus its
// sleep); each failed attempt is followed by the "attemptReconnection"
// sleep, 1 s, then doubling while failures follow within 2 x ConnectTimeout
// (30 s) plus the last sleep. Attempts thus come 0, 1, 3, 7, 15 ... s after
// the loss. The first Connect retries every ConnectRetryInterval (30 s),
// flat; the protocol is the library's default (3.1.1, falling back to 3.1
// on a first connect that fails, and locked to the version that worked
// after it).
//
// With jitter in the spec, MaxReconnectInterval is 0, so both sleeps are 0
// (backoff.go clamps the initial sleep to the maximum), and the connection
// notification handler, called synchronously before each dial with the
// attempt's index since the loss (ConnectionNotificationConnecting, Attempt
// from 0), sleeps U(0, min(cap, base·2^Attempt)) first.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/internal/thirdparty"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pahogofleet:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: pahogofleet SPEC_JSON")
	}
	var spec thirdparty.Spec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	out := &lines{w: bufio.NewWriter(stdout)}
	broker := "tcp://" + net.JoinHostPort(spec.Host, strconv.Itoa(spec.Port))
	clients := make([]mqtt.Client, spec.N)
	for i := range clients {
		id := spec.Prefix + strconv.Itoa(i)
		o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(true).
			SetKeepAlive(spec.Keepalive).SetAutoReconnect(true).SetConnectRetry(true).
			SetOnConnectHandler(func(mqtt.Client) { out.say("connected " + id) }).
			SetConnectionLostHandler(func(mqtt.Client, error) { out.say("lost " + id) })
		if spec.JitterBase > 0 {
			o.SetMaxReconnectInterval(0)
			o.SetConnectionNotificationHandler(jitter(spec, uint64(i)))
		}
		clients[i] = mqtt.NewClient(o)
		clients[i].Connect() // retries on its own: the token is not awaited
	}
	_, _ = io.Copy(io.Discard, stdin)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.Disconnect(250) })
	}
	wg.Wait()
	return out.flush()
}

// jitter sleeps before each reconnect attempt: U(0, min(cap, base·2^k)) for
// the k-th attempt since the loss, k from 0.
func jitter(spec thirdparty.Spec, client uint64) mqtt.ConnectionNotificationHandler {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(spec.Seed, client))
	return func(_ mqtt.Client, n mqtt.ConnectionNotification) {
		c, ok := n.(mqtt.ConnectionNotificationConnecting)
		if !ok || !c.IsReconnect {
			return
		}
		ceiling := spec.JitterCap
		if c.Attempt < 40 && spec.JitterBase<<c.Attempt < ceiling {
			ceiling = spec.JitterBase << c.Attempt
		}
		mu.Lock()
		d := time.Duration(r.Int64N(int64(ceiling) + 1))
		mu.Unlock()
		time.Sleep(d)
	}
}

// lines writes whole lines from many goroutines, each flushed at once.
type lines struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func (l *lines) say(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		_, l.err = l.w.WriteString(s + "\n")
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
}

func (l *lines) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
