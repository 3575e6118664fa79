package report_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportInABrowser renders the fixture's report and opens its
// index.html in headless Chromium: the page must load with no console
// error, no exception and no request outside itself (its charts are
// inlined), every chart image must decode, and the answer — both
// recommendations with their evidence — must sit in the first screen of
// a 1280×900 window; every chart must show at no less than 70% of its
// size (the full grid of every guard excepted: the safety figures of the
// two intents come first), and each intent's safety figure be at most
// 1,600 px tall at full size. Screenshots of that first screen and of the whole
// page go to the test's artifact dir.
func TestReportInABrowser(t *testing.T) {
	bin := needChromium(t)
	// Rendering the fixture is shared with other tests and may come
	// first: the browser's two minutes count from when the page exists.
	openReport(t, bin, filepath.Join(rendered(t), "index.html"), "report", false)
}

// TestSampleInABrowser opens the committed sample report,
// docs/sample/index.html (make sample: its charts linked, not inlined),
// as TestReportInABrowser opens the fixture's: the answer on the first
// screen, every chart found and decoded at a readable size, each
// intent's safety figure at most 1,600 px tall, no request outside the
// sample's dir. It takes about 30 s under a load average of 30 on 2
// cores (no screenshot of the whole page, the slowest call).
func TestSampleInABrowser(t *testing.T) {
	bin := needChromium(t)
	page, err := filepath.Abs(filepath.Join("..", "docs", "sample", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	openReport(t, bin, page, "sample", true)
}

// needChromium skips the test under -short or without a Chromium, and
// returns the Chromium to drive.
func needChromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a headless Chromium: skipped under -short (make unit); make test runs it")
	}
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium not found (Debian package chromium, which scripts/deps.sh installs; or set LOCKBENCH_CHROMIUM): the report was not rendered in a browser")
	}
	return bin
}

// openReport opens the report at path (an index.html) in Chromium at
// 1280×900, within two minutes, and checks what TestReportInABrowser
// says; with linked (the sample), the page may load its charts from the
// charts dir beside it. Screenshots go to the test's artifact dir, named
// after name: the first screen, and the whole page unless linked.
func openReport(t *testing.T, bin, path, name string, linked bool) {
	t.Helper()
	page := "file://" + path
	charts := "file://" + filepath.Join(filepath.Dir(path), "charts") + "/"
	art := artifactDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	b := startBrowser(t, ctx, bin)
	const width, height = 1280, 900
	s, err := b.pageSession(ctx, width, height)
	if err != nil {
		t.Fatal(err)
	}
	from := len(b.recorded())
	if err := b.call(ctx, s, "Page.navigate", map[string]any{"url": page}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.waitEvent(ctx, s, "Page.loadEventFired", from); err != nil {
		t.Fatal(err)
	}

	// Every image decoded, and where the answer ends.
	var facts struct {
		Images, Broken int
		AnswerBottom   float64
		Answers        int
		FirstH2        string
		PageHeight     float64
		Charts         []struct {
			ID                 string
			NaturalW, NaturalH float64
			ShownW, ShownH     float64
		}
	}
	err = b.evaluate(ctx, s, `(() => {
		const imgs = [...document.images];
		const box = document.querySelector('.answers');
		return {
			Images: imgs.length,
			Broken: imgs.filter(i => !i.complete || i.naturalWidth === 0).length,
			AnswerBottom: box ? box.getBoundingClientRect().bottom : -1,
			Answers: document.querySelectorAll('.answer').length,
			FirstH2: (document.querySelector('h2') || {}).textContent || '',
			PageHeight: document.documentElement.scrollHeight,
			Charts: [...document.querySelectorAll('figure[id^="chart-"] img')].map(i => ({
				ID: i.closest('figure').id, NaturalW: i.naturalWidth, NaturalH: i.naturalHeight,
				ShownW: i.getBoundingClientRect().width, ShownH: i.getBoundingClientRect().height,
			})),
		};
	})()`, &facts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.screenshot(ctx, s, filepath.Join(art, name+"-first-screen.png"), nil); err != nil {
		t.Fatal(err)
	}
	full := min(facts.PageHeight, 16000)
	if linked {
		full = 0
	}
	if full > 0 {
		if err := b.screenshot(ctx, s, filepath.Join(art, name+"-full-page.png"), map[string]any{"x": 0, "y": 0, "width": width, "height": full, "scale": 1}); err != nil {
			t.Fatal(err)
		}
	}

	if facts.Images == 0 || facts.Broken > 0 {
		t.Errorf("%d images, %d of them did not decode", facts.Images, facts.Broken)
	}
	if facts.Answers != 2 || facts.AnswerBottom <= 0 || facts.AnswerBottom > height {
		t.Errorf("the page does not open with both answers in its first %d px: %d answer boxes ending at %.0f px", height, facts.Answers, facts.AnswerBottom)
	}
	intents := 0
	for _, c := range facts.Charts {
		scale := c.ShownW / c.NaturalW
		t.Logf("%s: %.0f×%.0f px, shown at %.0f×%.0f (%.0f%%)", c.ID, c.NaturalW, c.NaturalH, c.ShownW, c.ShownH, 100*scale)
		if c.ID != "chart-safety" && scale < 0.7 {
			t.Errorf("%s is %.0f px wide and shown at %.0f px (%.0f%%): its text is too small to read", c.ID, c.NaturalW, c.ShownW, 100*scale)
		}
		if strings.HasPrefix(c.ID, "chart-safety-") {
			intents++
			if c.NaturalH > 1600 {
				t.Errorf("%s is %.0f px tall: it does not fit a screen", c.ID, c.NaturalH)
			}
		}
	}
	if intents != 2 {
		t.Errorf("%d safety figures of an intent, want 2 (efficiency, correctness)", intents)
	}
	if facts.FirstH2 != "The answer" {
		t.Errorf("the page starts with %q, want the answer", facts.FirstH2)
	}

	for _, e := range b.recorded() {
		if e.SessionID != s {
			continue
		}
		switch e.Method {
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string            `json:"type"`
				Args []json.RawMessage `json:"args"`
			}
			json.Unmarshal(e.Params, &p)
			if p.Type == "error" || p.Type == "warning" || p.Type == "assert" {
				t.Errorf("console %s: %s", p.Type, e.Params)
			}
		case "Runtime.exceptionThrown":
			t.Errorf("exception: %s", e.Params)
		case "Log.entryAdded":
			var p struct {
				Entry struct{ Level, Text, URL string } `json:"entry"`
			}
			json.Unmarshal(e.Params, &p)
			if p.Entry.Level == "error" || p.Entry.Level == "warning" {
				t.Errorf("browser log %s: %s (%s)", p.Entry.Level, p.Entry.Text, p.Entry.URL)
			}
		case "Network.requestWillBeSent":
			var p struct {
				Request struct{ URL string } `json:"request"`
			}
			json.Unmarshal(e.Params, &p)
			if u := p.Request.URL; u != page && !strings.HasPrefix(u, "data:") && !(linked && strings.HasPrefix(u, charts)) {
				t.Errorf("the page requested %s: not self-contained", u)
			}
		case "Network.loadingFailed":
			t.Errorf("a load failed: %s", e.Params)
		}
	}
}
