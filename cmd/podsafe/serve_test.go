package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/report"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServe(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "store")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	writeRun(t, filepath.Join(store, "reg", "old-seed1"), 1, checker.Ok, t0)
	writeRun(t, filepath.Join(store, "reg", "new-seed2"), 2, checker.Illegal, t0.Add(time.Hour))
	os.WriteFile(filepath.Join(store, "reg", "old-seed1", "podsafe.log"), []byte("log line"), 0o644)
	os.Symlink(filepath.Join("reg", "new-seed2"), filepath.Join(store, "latest"))
	os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(base, "secret"), filepath.Join(store, "escape"))

	srv, err := report.NewServer(store)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	code, index := get(t, ts.URL+"/")
	if code != 200 {
		t.Fatalf("index: %d %s", code, index)
	}
	newer, older := strings.Index(index, "reg/new-seed2"), strings.Index(index, "reg/old-seed1")
	if newer < 0 || older < 0 || newer > older {
		t.Errorf("index lists the runs at %d and %d, want both, newest first:\n%s", newer, older, index)
	}
	if strings.Count(index, "reg/new-seed2/\"") != 1 {
		t.Errorf("the run behind store/latest is listed more than once")
	}
	for _, want := range []string{
		`<span class="badge v-illegal">Illegal</span>`, `<span class="badge v-ok">Ok</span>`,
		`href="/reg/old-seed1/report.html"`, `href="/reg/old-seed1/results.json"`,
		`href="/reg/old-seed1/history.jsonl"`, `href="/reg/old-seed1/podsafe.log"`,
	} {
		if !strings.Contains(index, want) {
			t.Errorf("index lacks %s", want)
		}
	}
	if strings.Contains(index, `href="/reg/new-seed2/podsafe.log"`) {
		t.Errorf("index links a log the run does not have")
	}

	// Static files, through the latest link too.
	if code, body := get(t, ts.URL+"/reg/old-seed1/podsafe.log"); code != 200 || body != "log line" {
		t.Errorf("podsafe.log: %d %q", code, body)
	}
	if code, body := get(t, ts.URL+"/latest/results.json"); code != 200 || !strings.Contains(body, `"seed": 2`) {
		t.Errorf("latest/results.json: %d %q", code, body)
	}
	// report.html is rendered when the run has none yet.
	if code, body := get(t, ts.URL+"/reg/new-seed2/report.html"); code != 200 || !strings.Contains(body, `id="timeline-box"`) {
		t.Errorf("report.html on the fly: %d", code)
	}
	// It is kept beside the run's history and served from there after.
	if _, err := os.Stat(filepath.Join(store, "reg", "new-seed2", report.ServeCacheFile)); err != nil {
		t.Errorf("the rendered report was not kept: %v", err)
	}
	if code, body := get(t, ts.URL+"/latest/report.html"); code != 200 || !strings.Contains(body, `id="timeline-box"`) {
		t.Errorf("report.html again, through latest: %d", code)
	}
	if code, _ := get(t, ts.URL+"/reg/none/report.html"); code != 404 {
		t.Errorf("report.html of no run: %d, want 404", code)
	}

	// Nothing outside the store.
	if code, body := get(t, ts.URL+"/escape"); code == 200 || strings.Contains(body, "secret") {
		t.Errorf("a link out of the store was followed: %d %q", code, body)
	}
	for _, p := range []string{"/../secret", "/reg/../../secret", "/%2e%2e/secret"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = p
		if strings.Contains(p, "%") {
			req = httptest.NewRequest("GET", p, nil)
		}
		srv.ServeHTTP(rec, req)
		if rec.Code == 200 || strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("GET %s: %d %q, want refused", p, rec.Code, rec.Body.String())
		}
	}
	// Raw request line with dot segments, as a hostile client sends it.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /../secret HTTP/1.0\r\n\r\n")
	raw, _ := io.ReadAll(conn)
	conn.Close()
	if strings.Contains(string(raw), "\r\n\r\nsecret") || strings.HasPrefix(string(raw), "HTTP/1.0 200") {
		t.Errorf("raw GET /../secret answered %q", raw)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestServeCmd(t *testing.T) {
	if out, code := run(context.Background(), "serve", "--store", filepath.Join(t.TempDir(), "nope")); code != exitUsage || !strings.Contains(out, "opening store") {
		t.Errorf("serve of a missing store: exit %d %q", code, out)
	}
	store := t.TempDir()
	for _, bad := range [][]string{{"--max-renders", "0"}, {"--render-wait", "0s"}} {
		if out, code := run(context.Background(), append([]string{"serve", "--store", store}, bad...)...); code != exitUsage || !strings.Contains(out, bad[0]) {
			t.Errorf("serve %v: exit %d %q, want a usage error naming the flag", bad, code, out)
		}
	}
	if out, code := run(context.Background(), "serve", "--store", store, "--addr", "256.0.0.1:1"); code != exitUsage || !strings.Contains(out, "listening on 256.0.0.1:1") {
		t.Errorf("serve on a bad address: exit %d %q", code, out)
	}
	// serve answers until its context ends, then shuts down cleanly.
	srv, err := report.NewServer(store)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, srv) }()
	if code, body := get(t, "http://"+ln.Addr().String()+"/"); code != 200 || !strings.Contains(body, "No runs yet") {
		t.Errorf("empty store index: %d %q", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}
