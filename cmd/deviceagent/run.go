package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/publisher"
)

// options are the agent's settings: each flag falls back to an environment
// variable (HERDGUARD_ and the flag's name in capitals, dashes as
// underscores), so a container or a systemd unit can configure it either way.
type options struct {
	broker, failover, clientID, username string
	password                             string
	ca, cert, key                        string
	configURL, dataDir, topic, events    string
	heartbeat, bootSpread, stopTimeout   time.Duration
	keepAlive, pingTimeout               time.Duration
	logLevel                             string
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("deviceagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	env := func(name, def string) string {
		if v := getenv("HERDGUARD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
			return v
		}
		return def
	}
	str := func(p *string, name, def, usage string) { fs.StringVar(p, name, env(name, def), usage) }
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		d := def
		if v := env(name, ""); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				d = -1 // reported below, naming the variable
			}
		}
		fs.DurationVar(p, name, d, usage)
	}
	str(&o.broker, "broker", "", "broker URL: tcp://host:1883 or ssl://host:8883 (required)")
	str(&o.failover, "failover", "", "more broker URLs, comma-separated: after a failed attempt or a lost session the next attempt goes to the next one in turn, after the usual wait")
	str(&o.clientID, "client-id", "", "MQTT client ID (required)")
	str(&o.username, "username", "", "MQTT user name")
	str(&o.password, "password", "", "MQTT password (prefer HERDGUARD_PASSWORD: flags show in ps)")
	str(&o.ca, "ca", "", "PEM file of the CA that signs the broker (ssl://)")
	str(&o.cert, "cert", "", "PEM device certificate, for mutual TLS")
	str(&o.key, "key", "", "PEM device key, for mutual TLS")
	str(&o.configURL, "config-url", "", "URL of this device's JSON configuration")
	str(&o.dataDir, "data-dir", "", "directory kept across reboots (the last good configuration and the telemetry queue)")
	str(&o.topic, "topic", "devices/{id}/heartbeat", "heartbeat topic; {id} is the client ID")
	str(&o.events, "event-topic", "devices/{id}/events", "topic of the agent's own events (a damaged queue); {id} is the client ID")
	dur(&o.heartbeat, "heartbeat", 30*time.Second, "heartbeat interval")
	dur(&o.bootSpread, "boot-spread", 10*time.Second, "the first connect waits a random time up to this")
	dur(&o.stopTimeout, "stop-timeout", 5*time.Second, "how long a clean stop may take")
	dur(&o.keepAlive, "keepalive", 30*time.Second, "MQTT keepalive; with -ping-timeout, how soon a silent path (a NAT that forgot the connection) is noticed")
	dur(&o.pingTimeout, "ping-timeout", 10*time.Second, "how long to wait for a PINGRESP before calling the connection dead")
	str(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.broker == "":
		return nil, errors.New("-broker (or HERDGUARD_BROKER) is required")
	case o.clientID == "":
		return nil, errors.New("-client-id (or HERDGUARD_CLIENT_ID) is required")
	case o.heartbeat <= 0:
		return nil, fmt.Errorf("-heartbeat must be a positive duration, got %v", o.heartbeat)
	case o.bootSpread <= 0:
		return nil, fmt.Errorf("-boot-spread must be a positive duration, got %v", o.bootSpread)
	case o.stopTimeout <= 0:
		return nil, fmt.Errorf("-stop-timeout must be a positive duration, got %v", o.stopTimeout)
	case o.keepAlive < time.Second:
		return nil, fmt.Errorf("-keepalive must be at least 1s (MQTT counts it in seconds), got %v", o.keepAlive)
	case o.pingTimeout <= 0:
		return nil, fmt.Errorf("-ping-timeout must be a positive duration, got %v", o.pingTimeout)
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	o, err := parse(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("device", o.clientID)
	device.RoutePahoLogs(log)

	timing := device.DefaultTiming()
	timing.BootSpread = o.bootSpread
	var failover []string
	for _, f := range strings.Split(o.failover, ",") {
		if f = strings.TrimSpace(f); f != "" {
			failover = append(failover, f)
		}
	}
	cfg := device.Config{Broker: o.broker, Failover: failover, ClientID: o.clientID, Username: o.username, Password: o.password,
		KeepAlive: o.keepAlive, PingTimeout: o.pingTimeout, Timing: &timing, Logger: log}
	if o.ca != "" || o.cert != "" {
		if cfg.TLS, err = device.LoadTLS(o.ca, o.cert, o.key); err != nil {
			return err
		}
	}
	agent, err := device.New(cfg)
	if err != nil {
		return err
	}
	if o.dataDir != "" { // kept across reboots: the last good config and the telemetry queue
		if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
			return err
		}
	}
	hb := &heartbeat{interval: o.heartbeat}
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		wg.Wait()
	}()
	if o.configURL != "" {
		fc := device.FetcherConfig{URL: o.configURL, Logger: log, FirstSpread: o.bootSpread, OnApply: func(c device.RemoteConfig) {
			if p, err := c.Policy(); err == nil && p != nil {
				agent.SetPolicy(p)
			}
			if c.HeartbeatInterval > 0 {
				hb.set(time.Duration(c.HeartbeatInterval))
			}
		}}
		if o.dataDir != "" {
			fc.Store = device.FileStore{Path: filepath.Join(o.dataDir, "config.json")}
		}
		fetcher, err := device.NewFetcher(fc)
		if err != nil {
			return err
		}
		if c, ok := fetcher.Current(); ok { // the last good config, from before the reboot
			fc.OnApply(c)
		}
		wg.Add(1)
		go func() { defer wg.Done(); fetcher.Run(runCtx) }()
	}
	log.Info("starting", "config", cfg)
	if err := agent.Start(runCtx); err != nil {
		return err
	}
	store, damage, err := openQueue(o.dataDir, log)
	if err != nil {
		return err
	}
	pub, err := publisher.New(publisher.Config{Session: agent, Store: store, Logger: log})
	if err != nil {
		store.Close()
		return err
	}
	defer pub.Close()
	if damage != nil { // tell the fleet's operators too: a device's log is rarely read
		event, _ := json.Marshal(map[string]string{"event": "telemetry-queue-damaged", "error": damage.Err.Error(),
			"moved_to": damage.MovedTo, "epoch": pub.Epoch()})
		if _, err := pub.Publish(strings.ReplaceAll(o.events, "{id}", o.clientID), event); err != nil {
			log.Warn("damage event not queued", "error", err)
		}
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = pub.Run(runCtx) }()
	topic := strings.ReplaceAll(o.topic, "{id}", o.clientID)
	wg.Add(1)
	go func() { defer wg.Done(); hb.run(runCtx, pub, topic, log) }()

	select {
	case <-ctx.Done():
		log.Info("stopping")
	case <-agent.Done():
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), o.stopTimeout)
	defer stopCancel()
	if err := agent.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if err := agent.Err(); err != nil && !errors.Is(err, device.ErrStopped) {
		return err // gave up or refused: firmware supervision decides what next
	}
	log.Info("stopped", "stats", fmt.Sprintf("%+v", agent.Stats()))
	return nil
}

// heartbeat enqueues a timestamp every interval.
type heartbeat struct {
	mu       sync.Mutex
	interval time.Duration
}

func (h *heartbeat) set(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.interval = d
}

func (h *heartbeat) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.interval
}

// run enqueues a heartbeat every interval, connected or not: the publisher
// keeps them across outages and delivers them in order.
func (h *heartbeat) run(ctx context.Context, pub *publisher.Publisher, topic string, log *slog.Logger) {
	for {
		if _, err := pub.Publish(topic, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
			log.Warn("heartbeat not queued", "error", err)
		}
		t := time.NewTimer(h.get())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// openQueue opens the telemetry queue: durable in dataDir if given, else in
// memory. A damaged queue file is moved aside (or kept with a new epoch),
// logged and returned as damage; the agent goes on. A queue another process
// holds is an error: two agents must not share a data directory.
func openQueue(dataDir string, log *slog.Logger) (publisher.Store, *publisher.CorruptStoreError, error) {
	if dataDir == "" {
		return &publisher.MemoryStore{}, nil, nil
	}
	s, err := publisher.OpenBoltStore(filepath.Join(dataDir, "queue.db"), publisher.BoltOptions{})
	var damage *publisher.CorruptStoreError
	if errors.As(err, &damage) {
		log.Error("telemetry queue was damaged", "error", err, "moved_to", damage.MovedTo)
		return s, damage, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry queue: %w", err)
	}
	return s, nil, nil
}
