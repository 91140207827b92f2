package agents

import (
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/testbroker"
)

// setupStandby starts the second in-process broker and gives every device
// both endpoints, the primary first.
func (f *Fleet) setupStandby(mc *member.Config) error {
	cfg := testbroker.Config{Transport: f.nodes[0].Transport()}
	if cfg.Transport == testbroker.Memory {
		cfg.Addr = "standby"
	}
	standby, err := testbroker.New(cfg)
	if err != nil {
		return err
	}
	f.standby = standby
	mc.Failover = []string{standby.URL()}
	if cfg.Transport == testbroker.Memory {
		mc.Dial = dialByURL([]*testbroker.Broker{f.nodes[0], standby})
	}
	// The devices know where they are connected; neither broker alone does.
	f.obs = f.devlog
	return nil
}
