package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium finds the browser, skipping the test when it is absent unless
// PODSAFE_BROWSER=1 asks for it (CI installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PODSAFE_BROWSER") == "1" {
		t.Fatal("PODSAFE_BROWSER=1 but chromium is not installed")
	}
	t.Skip("chromium is not installed (set PODSAFE_BROWSER=1 to require it)")
	return ""
}

// TestReportInBrowser opens a generated report.html in headless Chromium and
// checks that its script ran without errors and drew the timeline.
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	writeTestRun(t, dir)
	if err := RenderDir(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+filepath.Join(t.TempDir(), "profile"),
		"--virtual-time-budget=5000", "--dump-dom", "file://"+filepath.Join(dir, ReportFile))
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)
	errs := regexp.MustCompile(`<div id="js-errors"[^>]*data-errors="(\d+)"[^>]*>([^<]*)`).FindStringSubmatch(dom)
	if errs == nil {
		t.Fatalf("the dumped DOM lacks #js-errors:\n%.2000s", dom)
	}
	if errs[1] != "0" {
		t.Errorf("the page's script failed: %s", errs[2])
	}
	tl := regexp.MustCompile(`<div class="chartbox" id="timeline-box" data-rendered="(\d)"[^>]*data-bands="(\d+)"`).FindStringSubmatch(dom)
	if tl == nil {
		// Attribute order may differ; read them one by one.
		box := regexp.MustCompile(`<div[^>]*id="timeline-box"[^>]*>`).FindString(dom)
		tl = []string{box, attr(box, "data-rendered"), attr(box, "data-bands")}
	}
	if tl[1] != "1" {
		t.Errorf("the timeline was not marked rendered: %q", tl[0])
	}
	if n, _ := strconv.Atoi(tl[2]); n != 3 {
		t.Errorf("the script counted %s fault bands, want 3: %q", tl[2], tl[0])
	}
	// The script ran: it hid the unjudged guarantees.
	if !regexp.MustCompile(`<body[^>]*class="[^"]*hide-unjudged`).MatchString(dom) {
		t.Errorf("the script did not run (body lacks hide-unjudged)")
	}
}

func attr(tag, name string) string {
	m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return ""
	}
	return m[1]
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// TestCompareInBrowser opens a generated conformance-compare.html in
// headless Chromium: the page parses into the rows and marks the test data
// asks for.
func TestCompareInBrowser(t *testing.T) {
	bin := chromium(t)
	embedded, kube := compareStores(t)
	c, err := CompareStores(embedded, kube, [2]string{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteComparison(dir, c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+filepath.Join(t.TempDir(), "profile"),
		"--dump-dom", "file://"+filepath.Join(dir, CompareHTMLFile))
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)
	if n := len(regexp.MustCompile(`<tr id="g-[^"]+" class="differ">`).FindAllString(dom, -1)); n != 3 {
		t.Errorf("the page shows %d differing rows, want 3", n)
	}
	if !strings.Contains(dom, `data-differences="3"`) || !strings.Contains(dom, `href="#g-PS-14"`) {
		t.Errorf("the page lacks the count of differences or the link to PS-14:\n%.2000s", dom)
	}
}
