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
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
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
// report.html is rendered on the fly when the run has none yet.
type Server struct {
	root  *os.Root
	store string
	files http.Handler
}

// NewServer opens store for serving. Close releases it.
func NewServer(store string) (*Server, error) {
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
	return &Server{root: root, store: store, files: http.FileServerFS(root.FS())}, nil
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
			if s.renderReport(w, path.Dir(rel)) {
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

// renderReport renders the report.html of the run at rel when it has a
// results.json, and reports whether it answered.
func (s *Server) renderReport(w http.ResponseWriter, rel string) bool {
	if _, err := s.root.Stat(path.Join(rel, ResultsFile)); err != nil {
		return false
	}
	dir := filepath.Join(s.store, filepath.FromSlash(rel))
	res, err := ReadResults(dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	var h *history.History
	if f, err := s.root.Open(path.Join(rel, HistoryFile)); err == nil {
		h, _ = history.Read(f)
		f.Close()
	}
	link := ""
	if s.exists(path.Join(rel, LinearizabilityFile)) {
		link = LinearizabilityFile
	}
	page, err := RenderRun(h, res, link)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page)
	return true
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
		for _, f := range []string{ReportFile, ResultsFile, HistoryFile, LinearizabilityFile, LogFile, JUnitFile} {
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
