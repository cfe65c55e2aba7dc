package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/podsafe/podsafe/checker"
)

//go:embed assets/index.html.tmpl
var indexTemplateText string

var indexTemplate = template.Must(template.New("index").Funcs(funcs).Parse(indexTemplateText))

// indexRun is one row of the store's index.
type indexRun struct {
	Path     string // slash path relative to the store
	Scenario string
	Seed     uint64
	Verdict  string
	Started  time.Time
	Duration string
	Error    string
	Files    []indexFile
	sortKey  time.Time
}

type indexFile struct {
	Name, Href string
}

type indexPage struct {
	Store       string
	Runs        []indexRun
	Conformance string
	Generated   string
}

// Server serves a store of runs over HTTP, as Jepsen's serve does: an index
// of the runs, newest first, and the files beneath the store. It refuses
// every path that leaves the store, symbolic links included. A run's
// report.html is rendered when the run has none yet, once: it is kept
// beside the run's history (ServeCacheFile) until the history or
// results.json changes, and only a few render at once (WithMaxRenders).
// A Server is safe for concurrent use.
type Server struct {
	root  *os.Root
	store string
	files http.Handler

	renders    chan struct{} // a slot per render allowed at once
	renderWait time.Duration
	mu         sync.Mutex
	runLocks   map[string]chan struct{} // per run: held while its report is checked or rendered
	// renderHook, when set, is called as each render starts (tests).
	renderHook func(run string)
}

// NewServer opens store for serving. Close releases it.
func NewServer(store string, opts ...ServerOption) (*Server, error) {
	st, err := os.Stat(store)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opening store: %s is not a directory", store)
	}
	root, err := os.OpenRoot(store)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	s := &Server{root: root, store: store, files: http.FileServerFS(root.FS()),
		renders: make(chan struct{}, DefaultMaxRenders), renderWait: DefaultRenderWait, runLocks: map[string]chan struct{}{}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Close releases the store.
func (s *Server) Close() error { return s.root.Close() }

// ServeHTTP serves the index at / and files beneath the store elsewhere.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			http.Error(w, "path leaves the store", http.StatusForbidden)
			return
		}
	}
	if p == "/" || p == "/index.html" && !s.exists("index.html") {
		s.index(w, r)
		return
	}
	rel := strings.TrimPrefix(path.Clean(p), "/")
	if !fs.ValidPath(rel) {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	// Resolve through the root first, so that a link out of the store is
	// refused rather than reported missing.
	if _, err := s.root.Stat(rel); err != nil {
		if path.Base(rel) == ReportFile && errors.Is(err, fs.ErrNotExist) {
			if s.renderReport(w, r, path.Dir(rel)) {
				return
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "path leaves the store or cannot be read", http.StatusForbidden)
		return
	}
	s.files.ServeHTTP(w, r)
}

func (s *Server) exists(rel string) bool {
	_, err := s.root.Stat(rel)
	return err == nil
}

// index lists the runs of the store, newest first.
func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	runs, err := s.runs()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p := indexPage{Store: s.store, Runs: runs, Generated: time.Now().UTC().Format(time.RFC3339)}
	if s.exists(ConformanceHTMLFile) {
		p.Conformance = ConformanceHTMLFile
	}
	var buf bytes.Buffer
	if err := indexTemplate.Execute(&buf, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// runs finds the runs of the store.
func (s *Server) runs() ([]indexRun, error) {
	dirs, err := FindRuns(s.store)
	if err != nil {
		return nil, err
	}
	var out []indexRun
	for _, dir := range dirs {
		rel, err := filepath.Rel(s.store, dir)
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		run := indexRun{Path: rel, Verdict: "no results"}
		if st, err := os.Stat(dir); err == nil {
			run.sortKey = st.ModTime()
		}
		if res, err := ReadResults(dir); err == nil {
			run.Scenario, run.Seed, run.Verdict, run.Started, run.Error = res.Scenario, res.Seed, string(res.Verdict), res.Started, res.Error
			if run.Verdict == "" {
				run.Verdict = string(checker.Unknown)
			}
			run.Duration = fmtDur(runDuration(res))
			if !res.Started.IsZero() {
				run.sortKey = res.Started
			}
		} else {
			run.Error = err.Error()
			run.Scenario = path.Dir(rel)
		}
		for _, f := range []string{ReportFile, ResultsFile, HistoryFile, CompressedHistoryFile, LinearizabilityFile, LogFile, JUnitFile} {
			if f == ReportFile || s.exists(path.Join(rel, f)) {
				if f == ReportFile && !s.exists(path.Join(rel, f)) && !s.exists(path.Join(rel, ResultsFile)) {
					continue
				}
				run.Files = append(run.Files, indexFile{Name: f, Href: "/" + rel + "/" + f})
			}
		}
		out = append(out, run)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].sortKey.Equal(out[j].sortKey) {
			return out[i].sortKey.After(out[j].sortKey)
		}
		return out[i].Path > out[j].Path
	})
	return out, nil
}
