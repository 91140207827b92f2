package plan

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree writes files (path: content) under a fresh root.
func tree(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
}

func TestAvailableMemoryIsThePodsWhereItsLimitIsLower(t *testing.T) {
	meminfo := "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  uint64
	}{
		{"no control group: the machine's", map[string]string{"proc/meminfo": meminfo}, 20000000 << 10},
		{"cgroup v2 in a container: the limit less usage", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "2147483648\n", "sys/fs/cgroup/memory.current": "147483648\n"},
			2000000000},
		{"cgroup v2, no limit", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n", "sys/fs/cgroup/memory.current": "1\n"}, 20000000 << 10},
		{"cgroup v2 on a host: the tightest of the group and its parents", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n", "sys/fs/cgroup/kubepods/pod1/c1/memory.current": "100\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max": "1000\n", "sys/fs/cgroup/kubepods/pod1/memory.current": "400\n",
			"sys/fs/cgroup/kubepods/memory.max": "900000\n", "sys/fs/cgroup/kubepods/memory.current": "400\n"}, 600},
		{"cgroup v1, no limit (2^63 rounded to a page)", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "4:memory:/process_api/x\n2:cpuacct:/\n",
			"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/process_api/x/memory.usage_in_bytes": "1614442496\n"}, 20000000 << 10},
		{"cgroup v1 with a limit", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n", "sys/fs/cgroup/memory/memory.usage_in_bytes": "73741824\n"},
			1000000000},
		{"usage over the limit: no room, which is not unknown", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "100\n", "sys/fs/cgroup/memory.current": "200\n"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, availableMemory(tree(t, c.files)))
		})
	}
}

// A shard is held to its own slice: its memory and descriptors, not the
// whole fleet's; and its refusal names how many shards would fit.
func TestAShardIsHeldToItsSlice(t *testing.T) {
	p := Default()
	p.Devices, p.Scenario, p.Broker, p.Descriptors = 100_000, BrokerRestart, "tcp://mqtt.iot.svc:1883", 40_000
	p.Shard, p.DisruptAt = Shard{Index: 3, Count: 10}, DisruptAt{After: time.Minute}
	require.NoError(t, p.Validate())
	assert.False(t, p.NeedsChildren(), "10,000 devices, three descriptors each, fit 38,000")
	assert.NoError(t, p.CheckFits(2<<30), "10,000 agents fit 2 GiB")

	err := p.CheckFits(1 << 30)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shard 3/10 runs 10,000 of 100,000 devices")
	assert.Contains(t, err.Error(), "at most 6,144 fit: run 17 shards or more")

	p.Descriptors = 20_000
	p.Exe = ""
	assert.ErrorContains(t, p.Validate(), "10000 devices through the fault proxy", "its own slice, counted")
}

// A wire fleet is sized as wire devices: a child holds as many as its
// descriptors (one a device), a pod reserves what a wire device costs,
// and an agents fleet that does not fit names what the wire engine holds.
func TestAWireFleetIsSizedAsWireDevices(t *testing.T) {
	p := Default()
	p.Engine, p.Transport, p.Devices = Wire, TCP, 100_000
	assert.Equal(t, 19_000, p.ChildSize(), "95 % of 20,000 descriptors, one a device")
	p.TCPPerProcess = 5000
	assert.Equal(t, 5000, p.ChildSize(), "the plan's own bound, if lower")
	p.Engine = Agents
	assert.Equal(t, DevicesPerChild, p.ChildSize())

	p.TCPPerProcess, p.Transport, p.Scenario, p.Broker = 0, Mem, BrokerRestart, ""
	err := p.CheckFits(1 << 30)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 6,144 fit, or 9,830 on -engine wire, or", "1 GiB less 256 MiB: 128 KiB an agent, 80 KiB a wire device")

	p.Engine, p.Broker, p.Scenario = Wire, "tcp://mqtt.iot.svc:1883", BrokerRestart
	p.Shard, p.DisruptAt = Shard{Index: 0, Count: 10}, DisruptAt{After: time.Minute}
	assert.ErrorContains(t, p.Validate(), "10000 devices through the fault proxy need 20000 descriptors in this process",
		"the proxy's two a device, beyond 19,000")
	p.Shard.Count = 12
	assert.ErrorContains(t, p.Validate(), "set Plan.Exe", "8,334 devices and their proxies: the devices in a child")
	p.Exe = "devicesim"
	require.NoError(t, p.Validate())
	assert.NoError(t, p.CheckFits(1<<30), "8,334 wire devices through the proxy, 48 KiB each, fit 1 GiB")
	err = p.CheckFits(512 << 20)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 5,461 fit", "256 MiB at 48 KiB a device")
}
