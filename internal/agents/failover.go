package agents

import (
	"context"
	"net"
	"net/url"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/testbroker"
)

// setupStandby starts the second in-process broker and gives every device
// both endpoints, the primary first.
func (r *run) setupStandby(mc *memberConfig) error {
	cfg := testbroker.Config{Transport: r.broker.Transport()}
	if cfg.Transport == testbroker.Memory {
		cfg.Addr = "standby"
	}
	standby, err := testbroker.New(cfg)
	if err != nil {
		return err
	}
	r.standby = standby
	mc.failover = []string{standby.URL()}
	if cfg.Transport == testbroker.Memory {
		primary, standbyURL := r.broker, standby.URL()
		mc.dial = func(int) device.DialFunc {
			return func(ctx context.Context, u *url.URL) (net.Conn, error) {
				if u.String() == standbyURL {
					return standby.DialContext(ctx, u)
				}
				return primary.DialContext(ctx, u)
			}
		}
	}
	// The devices know where they are connected; neither broker alone does.
	r.obs = deviceObserver{r.devlog}
	return nil
}
