package faultproxy_test

import (
	"context"
	"fmt"
	"net/url"

	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/testbroker"
)

// A proxy in front of a broker on TCP (here the test broker; in a storm
// test, the broker you run). Devices connect to p.Addr() instead.
func Example() {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TCP})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	u, _ := url.Parse(b.URL())
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(u.Host), Listen: "127.0.0.1:0"})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	p.BeginOutage() // the broker, as the devices see it, is down
	_, err = p.Dial(context.Background())
	fmt.Println(err)
	p.EndOutage()
	conn, err := p.Dial(context.Background())
	fmt.Println(err)
	conn.Close()
	k := p.Recorder().Counts()
	fmt.Println(k.Attempts, "attempts,", k.Refused, "refused")
	// Output:
	// faultproxy: connection refused
	// <nil>
	// 2 attempts, 1 refused
}
