package thirdparty_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/thirdparty"
)

// verdictTB records how a start ended the test: Skipf or Fatalf end its
// goroutine, as the testing package's do.
type verdictTB struct {
	testing.TB
	skipped, failed string
}

func (tb *verdictTB) Helper() {}

func (tb *verdictTB) Skipf(format string, args ...any) {
	tb.skipped = fmt.Sprintf(format, args...)
	tb.SkipNow()
}

func (tb *verdictTB) Fatalf(format string, args ...any) {
	tb.failed = fmt.Sprintf(format, args...)
	tb.SkipNow()
}

func (tb *verdictTB) SkipNow() { runtime.Goexit() }

// run calls start with tb in a goroutine of its own and waits for it.
func (tb *verdictTB) run(start func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		start(tb)
	}()
	<-done
}

// Without MQTT.js a test is skipped with the install line, or fails where
// HERDGUARD_REQUIRE_THIRDPARTY is set, as in CI.
func TestMissingClientSkipsOrFails(t *testing.T) {
	t.Setenv("HERDGUARD_MQTTJS_DIR", t.TempDir())
	for _, require := range []string{"", "1"} {
		t.Setenv("HERDGUARD_REQUIRE_THIRDPARTY", require)
		tb := &verdictTB{TB: t}
		tb.run(func(tb testing.TB) { thirdparty.StartMQTTJS(tb, "127.0.0.1:1883", 1, thirdparty.Options{}) })
		if require == "" {
			assert.Contains(t, tb.skipped, "npm ci --prefix")
			assert.Empty(t, tb.failed)
		} else {
			assert.Contains(t, tb.failed, "is required here")
			assert.Empty(t, tb.skipped)
		}
	}
}

// A jitter with a cap below its base, or a cap alone, is refused before
// anything starts.
func TestInvalidJitterIsRefused(t *testing.T) {
	for _, j := range []thirdparty.Jitter{{Base: 2e9, Cap: 1e9}, {Cap: 1e9}, {Base: -1}} {
		tb := &verdictTB{TB: t}
		tb.run(func(tb testing.TB) { thirdparty.StartPahoGo(tb, "127.0.0.1:1883", 1, thirdparty.Options{Jitter: j}) })
		assert.Contains(t, tb.failed, "invalid jitter", "%+v", j)
	}
}
