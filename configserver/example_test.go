package configserver_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/herdguard/herdguard/configserver"
)

func Example() {
	s := configserver.NewServer()
	defer s.Close()
	s.SetConfig("", []byte(`{"reconnect":{"max_backoff":"32s"}}`))
	_ = s.AddFault(configserver.Fault{Kind: configserver.TooManyRequests, RetryAfter: 30 * time.Second, Times: 1})

	for range 2 {
		resp, err := http.Get(s.DeviceURL("dev-1"))
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q body=%s\n", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	for _, r := range s.Requests() {
		fmt.Println(r.Device, r.Status, r.Fault)
	}
	// Output:
	// 429 Retry-After="30" body=
	// 200 Retry-After="" body={"reconnect":{"max_backoff":"32s"}}
	// dev-1 429 429
	// dev-1 200
}
