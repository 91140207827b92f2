package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/stormstatstest"
)

// chromium is the browser the report is opened in: Debian's chromium,
// which .ci/run installs. Without it the test is skipped, loudly, unless
// HERDGUARD_REQUIRE_CHROMIUM says CI has it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("HERDGUARD_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium), and HERDGUARD_REQUIRE_CHROMIUM is set")
	}
	t.Skip("SKIPPED: chromium is not installed (apt-get install chromium): report.html is not opened in a browser")
	return ""
}

// pageCheck is what a reader of report.html sees of its chart at one
// window size, as the browser laid it out.
type pageCheck struct {
	Error    string   `json:"error"`
	Left     float64  `json:"left"`
	Top      float64  `json:"top"`
	Width    float64  `json:"width"`
	Height   float64  `json:"height"`
	ViewW    float64  `json:"vw"`
	ViewH    float64  `json:"vh"`
	Texts    int      `json:"texts"`
	Overlaps []string `json:"over"`
	Outside  []string `json:"outside"`
	Summary  string   `json:"summary"`
}

// chartCheck scrolls the chart into view and measures it and every text of
// it: each pair of texts whose boxes overlap by more than a pixel, each
// text that leaves the chart's box.
const chartCheck = `(() => {
  const svg = document.querySelector('figure svg');
  if (!svg) return {error: 'no chart in the page'};
  svg.scrollIntoView({block: 'start'});
  const r = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].map(t => ({s: t.textContent, b: t.getBoundingClientRect()}))
    .filter(t => t.b.width > 0 && t.s.trim() !== '');
  const over = [];
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const a = texts[i].b, b = texts[j].b;
    const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (x > 1 && y > 1) over.push(texts[i].s + ' | ' + texts[j].s);
  }
  const outside = texts.filter(t => t.b.left < r.left - 1 || t.b.right > r.right + 1 || t.b.top < r.top - 1 ||
    t.b.bottom > r.bottom + 1).map(t => t.s);
  const summary = document.querySelector('.summary');
  return {left: r.left, top: r.top, width: r.width, height: r.height, vw: innerWidth, vh: innerHeight,
    texts: texts.length, over: over, outside: outside, summary: summary ? summary.innerText : ''};
})()`

// report.html as a person opens it, from the file, in a real browser: a
// restart (two policies stacked), a throttled restart, and a cluster's
// timeline. Each page loads with no console error and no request beyond
// itself; the chart is visible and inside the window at 1280x800 and at a
// phone's 390x844; no text of the chart overlaps another or leaves it; the
// summary comes first. A screenshot of each is kept (HERDGUARD_ARTIFACTS
// names where; CI keeps them).
func TestReportOpensInABrowser(t *testing.T) {
	exe := chromium(t)
	if stormstatstest.RaceDetector {
		t.Skip("a browser's pace: make stats runs it without the race detector")
	}
	pages := map[string]func(dir string) []string{
		"restart": func(dir string) []string {
			return []string{"run", "-engine", "virtual", "-devices", "2000", "-out", dir}
		},
		"throttled-restart": func(dir string) []string {
			return []string{"run", "-f", "../../examples/throttled-restart.yaml", "-out", dir}
		},
		"cluster-timeline": func(dir string) []string {
			return []string{"run", "-f", "../../examples/cluster-timeline.yaml", "-out", dir}
		},
		"judged-log": func(dir string) []string {
			log := filepath.Join(t.TempDir(), "mosquitto.log")
			require.NoError(t, os.WriteFile(log, []byte(restartedMosquittoLog(1000)), 0o600))
			return []string{"judge", "-out", dir, log}
		},
	}
	artifacts := os.Getenv("HERDGUARD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o755))

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	require.NoError(t, chromedp.Do(browser), "chromium starts")

	for name, args := range pages {
		dir := t.TempDir()
		var out strings.Builder
		require.NoError(t, run(context.Background(), args(dir), noenv, nil, &out, &out), out.String())
		page := "file://" + filepath.Join(dir, "report.html")
		for _, size := range []struct{ w, h int64 }{{1280, 800}, {390, 844}} {
			t.Run(fmt.Sprintf("%s/%dx%d", name, size.w, size.h), func(t *testing.T) {
				tab, cancel := chromedp.NewContext(browser)
				defer cancel()
				ctx, cancelTimeout := context.WithTimeout(tab, time.Minute)
				defer cancelTimeout()
				require.NoError(t, chromedp.Do(tab), "a tab opens")
				// every console call, uncaught exception and browser log entry
				// (a request that failed) at warning or worse
				var mu sync.Mutex
				var problems []string
				heard := make(chan struct{})
				messages := chromedp.Console(ctx)
				go func() {
					defer close(heard)
					for m, err := range messages {
						if err != nil {
							return
						}
						if m.Type == chromedp.ConsoleWarning || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
							mu.Lock()
							problems = append(problems, fmt.Sprintf("%s: %s (%s)", m.Type, m.Text, m.URL))
							mu.Unlock()
						}
					}
				}()
				require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h), chromedp.Navigate(page), chromedp.WaitReady("body")))
				got, err := chromedp.Run(ctx, chromedp.Evaluate[pageCheck](chartCheck))
				require.NoError(t, err)
				shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(artifacts, fmt.Sprintf("report-%s-%dx%d.png", name, size.w, size.h)), shot, 0o644))
				cancelTimeout()
				<-heard

				mu.Lock()
				assert.Empty(t, problems, "the page loads with no error or warning")
				mu.Unlock()
				t.Logf("%+v", got)
				require.Empty(t, got.Error)
				assert.Positive(t, got.Width)
				assert.Positive(t, got.Height)
				assert.GreaterOrEqual(t, got.Left, 0.0, "the chart's left edge in the window")
				assert.LessOrEqual(t, got.Left+got.Width, got.ViewW+0.5, "the chart's right edge in the window")
				assert.LessOrEqual(t, got.Height, got.ViewH+0.5, "the whole chart fits the window's height")
				assert.Greater(t, got.Texts, 10, "the chart's title, labels and legend are text")
				assert.Empty(t, got.Overlaps, "texts of the chart that overlap")
				assert.Empty(t, got.Outside, "texts that leave the chart")
				assert.Regexp(t, `(spread|waves|inconclusive)`, got.Summary, "the summary, with the verdict, comes first")
			})
		}
	}
}

// restartedMosquittoLog is mosquitto's log of a fleet of n booting over
// 20 s, the broker stopped 10 minutes on, and the fleet back over a
// minute from 30 s after, the most at first: two recoveries.
func restartedMosquittoLog(n int) string {
	var b strings.Builder
	const t0 = 1700000000
	line := func(at float64, text string) { fmt.Fprintf(&b, "%d: %s\n", int64(t0+at), text) }
	for d := range n {
		line(float64(d)*20/float64(n), fmt.Sprintf("New client connected from 10.0.0.1:%d as dev-%d (p2, c1, k30).", 4000+d, d))
	}
	line(600, "mosquitto version 2.0.11 terminating")
	for d := range n {
		line(630+60*math.Sqrt(float64(d)/float64(n)), fmt.Sprintf("New client connected from 10.0.0.1:%d as dev-%d (p2, c1, k30).", 5000+d, d))
	}
	return b.String()
}
