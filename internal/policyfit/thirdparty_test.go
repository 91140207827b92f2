package policyfit_test

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/policyfit"
)

// readDevicesCSV reads a devicesim proxy's devices.csv: each device's
// waits in seconds, the first from the disruption, its attempts at their
// running sums; the last attempt admitted, the others refused.
func readDevicesCSV(t *testing.T, path string) []policyfit.Device {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var devices []policyfit.Device
	for _, row := range rows[1:] {
		d, at := policyfit.Device{ID: row[0]}, time.Duration(0)
		for _, w := range strings.Fields(row[3]) {
			s, err := strconv.ParseFloat(w, 64)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, row[0], err)
			}
			at += time.Duration(math.Round(s * 1e9))
			d.Attempts = append(d.Attempts, attempt.Record{T: at})
		}
		if len(d.Attempts) > 0 {
			d.Attempts[len(d.Attempts)-1].Outcome = fault.Accepted
		}
		devices = append(devices, d)
	}
	return devices
}

// One storm through devicesim proxy and mosquitto, broker down 20 s, 200
// real clients a fleet: MQTT.js 5 (a constant 1 s, from setInterval in one
// event loop, so each device's gaps drift by tens of ms), paho Python's
// and paho Go's own exponential (paho Go's first attempt at once), and
// each with full jitter in our reconnect package. Options as devicesim
// proxy sets them.
func TestInferReadsThirdPartyClients(t *testing.T) {
	near := func(got, want, tol float64) bool { return math.Abs(got/want-1) <= tol }
	for _, tc := range []struct {
		file      string
		family    policyfit.Family
		immediate bool
	}{
		{"mqttjs", policyfit.Constant, false},
		{"paho-python", policyfit.Exponential, false},
		{"paho-go", policyfit.Exponential, true},
		{"mqttjs-full-jitter", policyfit.FullJitter, false},
		{"paho-python-full-jitter", policyfit.FullJitter, false},
		{"paho-go-full-jitter", policyfit.FullJitter, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			devices := readDevicesCSV(t, "testdata/devices-"+tc.file+".csv")
			r, err := policyfit.Infer(devices, policyfit.Options{NoticeWindow: time.Second, Return: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			f := r.Fleet
			t.Logf("%s base %v x%.2f cap %v (at least %v), immediate %.2f, margin %.0f over %s, KS %.3f, spec %q",
				f.Family, f.Base, f.Factor, f.Cap, f.CapAtLeast, f.FirstImmediate, f.Margin, f.RunnerUp, f.KS, f.Spec)
			if f.Family != tc.family || f.Err != nil || len(r.Groups) != 1 {
				t.Fatalf("named %q (%v), base %v, %d groups; want %s", f.Family, f.Err, f.Base, len(r.Groups), tc.family)
			}
			if !near(f.Base.Seconds(), 1, 0.1) {
				t.Errorf("base %v, want 1 s", f.Base)
			}
			if tc.family == policyfit.Exponential && !near(f.Factor, 2, 0.05) {
				t.Errorf("factor %.3f, want 2", f.Factor)
			}
			if tc.immediate && f.FirstImmediate <= 0.9 || !tc.immediate && f.FirstImmediate > 0.1 {
				t.Errorf("first attempt immediate on %.0f %% of devices", 100*f.FirstImmediate)
			}
		})
	}
}
