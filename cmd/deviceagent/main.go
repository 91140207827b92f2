// Command deviceagent is the reference firmware: it keeps an MQTT session
// whose reconnects are timed by herdguard, publishes a heartbeat, and keeps
// its configuration fresh over HTTP. See `deviceagent -h`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "deviceagent:", err)
		os.Exit(1)
	}
}
