package report

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/internal/heappeak"
)

// servedStore is a store of n runs (run-0 …) with no report.html, served
// with opts; renders counts the reports rendered.
func servedStore(t *testing.T, n int, opts ...ServerOption) (store string, srv *Server, renders *atomic.Int64) {
	store = t.TempDir()
	for i := range n {
		dir := filepath.Join(store, fmt.Sprintf("run-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestRun(t, dir)
	}
	srv, err := NewServer(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	renders = &atomic.Int64{}
	srv.renderHook = func(string) { renders.Add(1) }
	return store, srv, renders
}

func getReport(t testing.TB, srv http.Handler, run string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/"+run+"/"+ReportFile, nil))
	return rec
}

func mustReport(t *testing.T, srv http.Handler, run string) {
	t.Helper()
	rec := getReport(t, srv, run)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="timeline-box"`) {
		t.Fatalf("GET %s/report.html: %d %.200s", run, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET %s/report.html: Content-Type %q", run, ct)
	}
}

// The report is rendered on the first request and served from the cache
// beside the history after.
func TestServeRendersOnce(t *testing.T) {
	store, srv, renders := servedStore(t, 1)
	mustReport(t, srv, "run-0")
	mustReport(t, srv, "run-0")
	mustReport(t, srv, "run-0")
	if n := renders.Load(); n != 1 {
		t.Errorf("%d renders for 3 requests, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(store, "run-0", ServeCacheFile)); err != nil {
		t.Errorf("no cached report: %v", err)
	}
	// A new Server over the same store uses the cache too.
	srv2, err := NewServer(store)
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	srv2.renderHook = func(string) { renders.Add(1) }
	mustReport(t, srv2, "run-0")
	if n := renders.Load(); n != 1 {
		t.Errorf("a second server rendered again (%d renders)", n)
	}
	// No temporary file is left behind, and a HEAD is answered too.
	left, _ := filepath.Glob(filepath.Join(store, "run-0", ServeCacheFile+".tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("HEAD", "/run-0/"+ReportFile, nil))
	if rec.Code != http.StatusOK {
		t.Errorf("HEAD report.html: %d", rec.Code)
	}
}

// A history or results.json newer than the cached report renders it again.
func TestServeRerendersNewerSources(t *testing.T) {
	store, srv, renders := servedStore(t, 1)
	mustReport(t, srv, "run-0")
	later := time.Now().Add(time.Hour)
	for i, f := range []string{HistoryFile, ResultsFile} {
		if err := os.Chtimes(filepath.Join(store, "run-0", f), later, later); err != nil {
			t.Fatal(err)
		}
		mustReport(t, srv, "run-0")
		mustReport(t, srv, "run-0")
		if n, want := renders.Load(), int64(i+2); n != want {
			t.Errorf("after %s changed: %d renders, want %d", f, n, want)
		}
		later = later.Add(time.Hour)
	}
	// A run's own report.html is served as it is.
	if err := os.WriteFile(filepath.Join(store, "run-0", ReportFile), []byte("own"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rec := getReport(t, srv, "run-0"); rec.Body.String() != "own" {
		t.Errorf("the run's own report.html was not served: %.100s", rec.Body)
	}
}

// Concurrent requests render each run once, and never more than the bound
// at once.
func TestServeBoundsConcurrentRenders(t *testing.T) {
	const runs, perRun, bound = 6, 4, 2
	_, srv, renders := servedStore(t, runs, WithMaxRenders(bound))
	var active, peak atomic.Int64
	srv.renderHook = func(string) {
		renders.Add(1)
		n := active.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		active.Add(-1)
	}
	var wg sync.WaitGroup
	for i := range runs * perRun {
		wg.Go(func() {
			rec := getReport(t, srv, fmt.Sprintf("run-%d", i%runs))
			if rec.Code != http.StatusOK {
				t.Errorf("request %d: %d", i, rec.Code)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > bound {
		t.Errorf("%d renders at once, bound %d", p, bound)
	}
	if n := renders.Load(); n != runs {
		t.Errorf("%d renders for %d runs", n, runs)
	}
}

// A request that waits for a render slot longer than the Server allows is
// told to come back.
func TestServeBusy(t *testing.T) {
	_, srv, _ := servedStore(t, 2, WithMaxRenders(1), WithRenderWait(50*time.Millisecond))
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv.renderHook = func(string) {
		once.Do(func() { close(started); <-release })
	}
	done := make(chan int)
	go func() { done <- getReport(t, srv, "run-0").Code }()
	<-started
	for _, run := range []string{"run-1", "run-0"} { // another run's slot, the same run's lock
		rec := getReport(t, srv, run)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s while the only slot is taken: %d, Retry-After %q; want 503 with Retry-After", run, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Errorf("the rendering request: %d", code)
	}
	mustReport(t, srv, "run-1")
}

// BenchmarkServe24 measures the peak live heap of 24 concurrent requests
// for the reports of 4 runs whose histories are PODSAFE_BENCH_HISTORY_MB
// (default 8) each, with no report yet: rendering per request as serve
// did (render-per-request) against the cached, bounded Server (cold: the
// first requests render, the others wait and share the result).
func BenchmarkServe24(b *testing.B) {
	mb := 8
	if v := os.Getenv("PODSAFE_BENCH_HISTORY_MB"); v != "" {
		fmt.Sscan(v, &mb)
	}
	const runs, requests = 4, 24
	store := b.TempDir()
	for i := range runs {
		dir := filepath.Join(store, fmt.Sprintf("run-%d", i))
		os.MkdirAll(dir, 0o755)
		writeBigHistory(b, filepath.Join(dir, HistoryFile), mb<<20)
		res := Results{Scenario: "register", Seed: uint64(i), Dir: dir, Verdict: checker.Ok, Started: testStart, Finished: testStart.Add(time.Minute),
			Checks: []checker.Result{{Checker: checker.RegisterChecker, Verdict: checker.Ok, Guarantees: []string{"STORE-LIN"}, Summary: "linearizable"}}}
		if err := WriteResults(dir, res); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("render-per-request", func(b *testing.B) {
		for b.Loop() {
			stop := heappeak.Start(2 * time.Millisecond)
			var wg sync.WaitGroup
			for i := range requests {
				wg.Go(func() {
					dir := filepath.Join(store, fmt.Sprintf("run-%d", i%runs))
					res, err := ReadResults(dir)
					if err != nil {
						b.Error(err)
						return
					}
					h, _ := history.Load(filepath.Join(dir, HistoryFile))
					if _, err := RenderRun(h, res, ""); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(stop())/(1<<20), "peak-heap-MB")
		}
	})
	b.Run("cached-bounded", func(b *testing.B) {
		for b.Loop() {
			for i := range runs {
				os.Remove(filepath.Join(store, fmt.Sprintf("run-%d", i), ServeCacheFile))
			}
			srv, err := NewServer(store)
			if err != nil {
				b.Fatal(err)
			}
			stop := heappeak.Start(2 * time.Millisecond)
			var wg sync.WaitGroup
			for i := range requests {
				wg.Go(func() {
					rec := httptest.NewRecorder()
					srv.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/run-%d/%s", i%runs, ReportFile), nil))
					if rec.Code != http.StatusOK {
						b.Errorf("request %d: %d", i, rec.Code)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(stop())/(1<<20), "peak-heap-MB")
			srv.Close()
		}
	})
}

// writeBigHistory writes a register history of about size bytes.
func writeBigHistory(b *testing.B, path string, size int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	n, _ := fmt.Fprintf(w, `{"kind":"meta","t":0,"run_id":"bench","scenario":"register","start":"2026-01-02T03:04:05Z"}`+"\n")
	for id := 1; n < size; id++ {
		t := int64(id) * 1_000_000
		k, _ := fmt.Fprintf(w, `{"kind":"invoke","t":%d,"id":%d,"process":%d,"f":"cas","key":"k%d","value":"v%d","expect":"v%d","invoke":%d}`+"\n",
			t, id, id%8, id%50, id, id-1, t)
		m, _ := fmt.Fprintf(w, `{"kind":"complete","t":%d,"id":%d,"process":%d,"f":"cas","key":"k%d","value":"v%d","expect":"v%d","status":"ok","rv":"%d","invoke":%d,"return":%d}`+"\n",
			t+500_000, id, id%8, id%50, id, id-1, id, t, t+500_000)
		n += k + m
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}
