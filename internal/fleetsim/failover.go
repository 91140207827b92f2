package fleetsim

import (
	"net"
	"net/url"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/testbroker"
)

// FailoverScenario: the fleet runs on a primary broker with a standby as
// its failover endpoint; the primary dies for good, and the fleet moves.
const FailoverScenario = "failover"

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
		mc.dial = func(int) paho.OpenConnectionFunc {
			return func(u *url.URL, o paho.ClientOptions) (net.Conn, error) {
				if u.String() == standbyURL {
					return standby.Dial(u, o)
				}
				return primary.Dial(u, o)
			}
		}
	}
	// The devices know where they are connected; neither broker alone does.
	r.obs = deviceObserver{r.devlog}
	return nil
}
