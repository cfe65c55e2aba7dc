package report

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/podsafe/podsafe/history"
)

// ServeCacheFile is where serve keeps the report.html it rendered for a run
// that has none, next to the run's history. It is rendered again when the
// history or results.json is newer.
const ServeCacheFile = ".report.serve.html"

// Defaults of the Server's render bound.
const (
	// DefaultMaxRenders is how many reports a Server renders at once: a
	// render holds the whole history in memory (a 40 MB history takes
	// about 100 MB), so requests beyond it wait.
	DefaultMaxRenders = 2
	// DefaultRenderWait is how long a request waits for its report before
	// it is answered 503 with Retry-After.
	DefaultRenderWait = 60 * time.Second
)

// renderRetryAfter is the Retry-After of a request that waited too long.
const renderRetryAfter = 5 * time.Second

// ServerOption adjusts a Server.
type ServerOption func(*Server)

// WithMaxRenders bounds the reports rendered at once; n < 1 means
// DefaultMaxRenders.
func WithMaxRenders(n int) ServerOption {
	return func(s *Server) {
		if n >= 1 {
			s.renders = make(chan struct{}, n)
		}
	}
}

// WithRenderWait bounds how long a request waits for a report to be
// rendered (its own or another request's of the same run) before it gets a
// 503 with Retry-After; d <= 0 means DefaultRenderWait. A request whose
// client goes away stops waiting at once.
func WithRenderWait(d time.Duration) ServerOption {
	return func(s *Server) {
		if d > 0 {
			s.renderWait = d
		}
	}
}

// errBusy is a request that waited for a render longer than the Server
// allows, or whose client went away.
var errBusy = errors.New("busy rendering reports")

// runLock takes the lock of the run at rel, so that one request renders a
// run's report and the others of that run wait for it; it gives up when
// ctx ends.
func (s *Server) runLock(ctx context.Context, rel string) (unlock func(), err error) {
	s.mu.Lock()
	l, ok := s.runLocks[rel]
	if !ok {
		l = make(chan struct{}, 1)
		s.runLocks[rel] = l
	}
	s.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, errBusy
	}
}

// renderSlot takes one of the Server's render slots, or gives up when ctx
// ends.
func (s *Server) renderSlot(ctx context.Context) (release func(), err error) {
	select {
	case s.renders <- struct{}{}:
		return func() { <-s.renders }, nil
	case <-ctx.Done():
		return nil, errBusy
	}
}

// sourcesTime is the newest modification time of the files the report of
// the run at rel is rendered from (results.json and the history, when it
// has one).
func (s *Server) sourcesTime(rel string) (time.Time, error) {
	st, err := s.root.Stat(path.Join(rel, ResultsFile))
	if err != nil {
		return time.Time{}, err
	}
	newest := st.ModTime()
	if st, err := s.root.Stat(s.historyPath(rel)); err == nil && st.ModTime().After(newest) {
		newest = st.ModTime()
	}
	return newest, nil
}

// historyPath is the history of the run at rel within the store: the
// plain file when it exists, else the compressed one (as history.Locate
// chooses).
func (s *Server) historyPath(rel string) string {
	plain := path.Join(rel, HistoryFile)
	if _, err := s.root.Lstat(plain); err != nil && errors.Is(err, fs.ErrNotExist) {
		if _, err := s.root.Lstat(path.Join(rel, CompressedHistoryFile)); err == nil {
			return path.Join(rel, CompressedHistoryFile)
		}
	}
	return plain
}

// cached opens the cached report of the run at rel when it is at least as
// new as its sources, else returns nil.
func (s *Server) cached(rel string, sources time.Time) *os.File {
	f, err := s.root.Open(path.Join(rel, ServeCacheFile))
	if err != nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.ModTime().Before(sources) {
		f.Close()
		return nil
	}
	return f
}

// renderReport answers a request for the report.html of the run at rel,
// which has none, when the run has a results.json, and reports whether it
// answered. It renders the report once and keeps it in the run's
// directory (ServeCacheFile); the cached report is served while it is at
// least as new as the run's history and results.json. At most MaxRenders
// reports render at once; a request waits for its run's report at most
// RenderWait.
func (s *Server) renderReport(w http.ResponseWriter, r *http.Request, rel string) bool {
	if _, err := s.root.Stat(path.Join(rel, ResultsFile)); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.renderWait)
	defer cancel()
	unlock, err := s.runLock(ctx, rel)
	if err != nil {
		busy(w)
		return true
	}
	f, page, err := s.freshReport(ctx, rel)
	unlock()
	switch {
	case errors.Is(err, errBusy):
		busy(w)
		return true
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if f == nil {
		// The store is read-only: the page was rendered for this request.
		w.Write(page)
		return true
	}
	defer f.Close()
	var mod time.Time
	if st, err := f.Stat(); err == nil {
		mod = st.ModTime()
	}
	http.ServeContent(w, r, ReportFile, mod, f)
	return true
}

// freshReport returns the cached report of the run at rel, rendering it
// first when it is missing or older than its sources; the caller holds
// the run's lock. When the cache cannot be written, it returns the
// rendered page instead of a file.
func (s *Server) freshReport(ctx context.Context, rel string) (*os.File, []byte, error) {
	sources, err := s.sourcesTime(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("report of %s: %w", rel, err)
	}
	if f := s.cached(rel, sources); f != nil {
		return f, nil, nil
	}
	release, err := s.renderSlot(ctx)
	if err != nil {
		return nil, nil, err
	}
	page, err := s.render(rel)
	release()
	if err != nil {
		return nil, nil, err
	}
	if err := s.keep(rel, page, sources); err != nil {
		return nil, page, nil
	}
	if f := s.cached(rel, sources); f != nil {
		return f, nil, nil
	}
	return nil, page, nil
}

// render renders the report of the run at rel from its results.json and
// history, read through the store's root.
func (s *Server) render(rel string) ([]byte, error) {
	if s.renderHook != nil {
		s.renderHook(rel)
	}
	b, err := s.root.ReadFile(path.Join(rel, ResultsFile))
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("results %s is corrupt: %w", path.Join(rel, ResultsFile), err)
	}
	var h *history.History
	if f, err := s.root.Open(s.historyPath(rel)); err == nil {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			h, _ = history.Read(f) // plain or compressed
		}
		f.Close()
	}
	link := ""
	if s.exists(path.Join(rel, LinearizabilityFile)) {
		link = LinearizabilityFile
	}
	return RenderRun(h, &res, link)
}

// keep writes page as the cached report of the run at rel, whole or not
// at all (a temporary file renamed over the old one), dated as its newest
// source so that a source written during the render makes it stale.
func (s *Server) keep(rel string, page []byte, sources time.Time) error {
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := path.Join(rel, ServeCacheFile+".tmp-"+hex.EncodeToString(suffix[:]))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(page)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Chtimes(tmp, sources, sources)
	}
	if err == nil {
		err = s.root.Rename(tmp, path.Join(rel, ServeCacheFile))
	}
	if err != nil {
		if rerr := s.root.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// busy answers a request that waited too long for a report.
func busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(renderRetryAfter/time.Second)))
	http.Error(w, "busy rendering reports; retry later", http.StatusServiceUnavailable)
}
