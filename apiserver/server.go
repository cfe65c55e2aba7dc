package apiserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// Config configures a Server. Zero values mean the defaults below; New fills
// them in before validating.
type Config struct {
	// Store holds every object; required.
	Store Store
	// Tokens maps each accepted bearer token to the identity it
	// authenticates (see identity.go); required and non-empty. A request
	// without a known token gets 401.
	Tokens map[string]string
	// Clock stamps deletionTimestamp and eviction times; nil means the real
	// clock. Watch timeouts and bookmarks run on real time: they are
	// transport behaviour, not part of the simulated cluster's time.
	Clock clock.PassiveClock
	// Logger receives one debug line per request and every server-side
	// failure; nil discards.
	Logger *slog.Logger
	// BookmarkInterval is how often a watch that asked for bookmarks gets a
	// BOOKMARK event.
	BookmarkInterval time.Duration
	// WatchTimeout ends watches that did not pass timeoutSeconds.
	WatchTimeout time.Duration
	// RequestTimeout bounds every request other than watches.
	RequestTimeout time.Duration
	// MaxConflictRetries bounds the read-modify-write loops (patch, status,
	// graceful delete, binding) that lose a compare-and-swap to another
	// writer; past it the client gets 409.
	MaxConflictRetries int
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the
	// read-only and the mutating requests served at once (watches are not
	// counted, the admin identity is exempt); past a bound a request gets
	// 429 with Retry-After: 1, as from kube-apiserver's flags of the same
	// names. Zero means the default (kube-apiserver's 400 and 200),
	// negative no bound.
	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
	// Seed seeds the suffixes of generateName; 0 means a random seed.
	Seed uint64
	// Logs reads the containers' logs for pods/log (kubectl logs); nil:
	// log requests get 503.
	Logs ContainerLogs

	// NamespaceLifecycle turns on kube-apiserver's NamespaceLifecycle
	// admission: a namespaced object may be created only in a namespace
	// that exists (404 otherwise) and is not terminating (403). The
	// cluster turns it on; off, objects may be created in any namespace.
	NamespaceLifecycle bool

	// BypassAuthority is a PLANTED BUG for the bug zoo, off by default: the
	// authority rules (authority.go) are evaluated and every refusal is
	// logged, but the request proceeds, so a component that force deletes
	// or binds without authority actually does it and the checkers must
	// catch the consequences.
	BypassAuthority bool

	_ struct{}
}

// Defaults of Config.
const (
	DefaultBookmarkInterval   = 10 * time.Second
	DefaultWatchTimeout       = 30 * time.Minute
	DefaultRequestTimeout     = 30 * time.Second
	DefaultMaxConflictRetries = 16
	// kube-apiserver's defaults of --max-requests-inflight and
	// --max-mutating-requests-inflight.
	DefaultMaxRequestsInFlight         = 400
	DefaultMaxMutatingRequestsInFlight = 200
)

// withDefaults returns c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BookmarkInterval == 0 {
		c.BookmarkInterval = DefaultBookmarkInterval
	}
	if c.WatchTimeout == 0 {
		c.WatchTimeout = DefaultWatchTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxConflictRetries == 0 {
		c.MaxConflictRetries = DefaultMaxConflictRetries
	}
	if c.MaxRequestsInFlight == 0 {
		c.MaxRequestsInFlight = DefaultMaxRequestsInFlight
	}
	if c.MaxMutatingRequestsInFlight == 0 {
		c.MaxMutatingRequestsInFlight = DefaultMaxMutatingRequestsInFlight
	}
	return c
}

// Validate reports every problem with c (after defaults), naming the field.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("Store is nil: pass the raftstore member this server serves"))
	}
	if len(c.Tokens) == 0 {
		errs = append(errs, errors.New("Tokens is empty: map at least one bearer token to an identity"))
	}
	for token, id := range c.Tokens {
		switch {
		case token == "":
			errs = append(errs, fmt.Errorf("Tokens has an empty token (identity %q)", id))
		case !KnownIdentity(id):
			errs = append(errs, fmt.Errorf("Tokens maps a token to unknown identity %q: use an Identity constant or KubeletIdentity(node)", id))
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"BookmarkInterval", c.BookmarkInterval}, {"WatchTimeout", c.WatchTimeout}, {"RequestTimeout", c.RequestTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative", d.field))
		}
	}
	if c.MaxConflictRetries < 0 {
		errs = append(errs, errors.New("MaxConflictRetries is negative"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
}

// Server serves a Store over the Kubernetes REST protocol. It is an
// http.Handler, safe for concurrent use; Close ends its watches.
type Server struct {
	cfg    Config
	tokens map[[sha256.Size]byte]string // Config.Tokens by digest
	// identities are the identities of Config.Tokens: who may be
	// impersonated.
	identities map[string]struct{}
	store      Store
	classes    *priorityClassCache
	namespaces *namespaceCache
	reg        *registry
	limits     *inflight
	log        *slog.Logger
	clock      clock.PassiveClock
	handler    http.Handler

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	// fp is the context the failpoint markers see: the identity (fpctx) of
	// the store member this server fronts, when its Store names one.
	fp context.Context

	mu  sync.Mutex
	rnd *rand.Rand
}

var _ http.Handler = (*Server)(nil)

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg, err := newRegistry(resourceTable)
	if err == nil {
		err = reg.addReviews(reviewTable)
	}
	if err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	// The type information of managed fields is built here, once per
	// process, rather than in the first write.
	if _, err := typeConverter(); err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	identities := map[string]struct{}{}
	for _, id := range cfg.Tokens {
		identities[id] = struct{}{}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	classes := newPriorityClassCache(cfg.Store, cfg.Logger)
	s := &Server{
		cfg: cfg, tokens: tokenTable(cfg.Tokens), identities: identities, store: dryRunStore{Store: cachingStore{Store: cfg.Store, classes: classes}, clock: cfg.Clock}, classes: classes,
		namespaces: newNamespaceCache(cfg.Store, cfg.Logger),
		reg:        reg, limits: newInflight(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight),
		log: cfg.Logger, clock: cfg.Clock,
		ctx: ctx, cancel: cancel, fp: fpctx.For(storeID(cfg.Store)),
		rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	s.handler = s.recoverPanics(s.logRequests(http.HandlerFunc(s.route)))
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Failpoint requestDelay: an API server slow to answer.
	failpoint.InjectContext(s.fp, "requestDelay", func() {})
	s.handler.ServeHTTP(w, r)
}

// Close ends every open watch and makes the server answer 503 from then on.
// It does not close the Store.
func (s *Server) Close() error {
	s.cancel()
	return nil
}

// closed reports whether Close was called.
func (s *Server) closed() bool { return s.ctx.Err() != nil }

// route dispatches a request by path: health and version without
// authentication, everything else after it.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/healthz" || path == "/livez" || strings.HasPrefix(path, "/healthz/") || strings.HasPrefix(path, "/livez/"):
		writeText(w, http.StatusOK, "ok")
		return
	case path == "/readyz" || strings.HasPrefix(path, "/readyz/"):
		if s.closed() {
			writeText(w, http.StatusServiceUnavailable, "server is closed")
			return
		}
		writeText(w, http.StatusOK, "ok")
		return
	case path == "/version":
		s.serveVersion(w)
		return
	}
	if s.closed() {
		writeError(w, apierrors.NewServiceUnavailable("the API server is shut down"))
		return
	}
	actor, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rec, _ := w.(*statusRecorder)
	if rec != nil {
		rec.identity = actor
	}
	identity, impersonated, err := s.impersonate(r, actor)
	if err != nil {
		writeError(w, err)
		return
	}
	r = r.WithContext(withIdentity(r.Context(), identity))
	if rec != nil && impersonated {
		rec.identity, rec.impersonator = identity, actor
	}
	segs := splitPath(path)
	switch {
	case path == openAPIPrefix || strings.HasPrefix(path, openAPIPrefix+"/"):
		s.serveOpenAPI(w, r)
	case len(segs) == 0:
		s.serveRoot(w)
	case segs[0] == "api" && len(segs) == 1:
		s.serveCoreVersions(w, r)
	case segs[0] == "apis" && len(segs) == 1:
		s.serveGroups(w)
	case segs[0] == "apis" && len(segs) == 2:
		s.serveGroup(w, segs[1])
	case segs[0] == "api" && len(segs) == 2:
		s.serveResourceList(w, "", segs[1])
	case segs[0] == "apis" && len(segs) == 3:
		s.serveResourceList(w, segs[1], segs[2])
	case segs[0] == "apis" && len(segs) == 4 && s.reg.review(segs[1], segs[2], segs[3]) != nil:
		s.serveReview(w, r, s.reg.review(segs[1], segs[2], segs[3]))
	case segs[0] == "api" || segs[0] == "apis":
		s.serveResource(w, r, segs)
	default:
		writeError(w, notFoundPath(path))
	}
}

// splitPath splits a URL path into its non-empty segments.
func splitPath(path string) []string {
	var out []string
	for _, p := range strings.Split(path, "/") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// writeText writes a plain-text answer (health endpoints).
func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text))
}

// requestContext bounds a non-watch request by RequestTimeout, the timeout
// query parameter and Close.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	timeout := s.cfg.RequestTimeout
	if t := r.URL.Query().Get("timeout"); t != "" {
		if d, err := time.ParseDuration(t); err == nil && d > 0 && d < timeout {
			timeout = d
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// statusRecorder remembers what a handler wrote, for logging and for the
// panic handler; Unwrap keeps the Flusher of the real writer reachable
// through http.ResponseController, which watches need.
type statusRecorder struct {
	http.ResponseWriter
	code int
	// identity is who the request runs as, impersonator who sent it when
	// that is someone else (see impersonate).
	identity, impersonator string
}

// WriteHeader records the first status code and passes it on.
func (rec *statusRecorder) WriteHeader(code int) {
	if rec.code == 0 {
		rec.code = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and passes the bytes on.
func (rec *statusRecorder) Write(p []byte) (int, error) {
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return rec.ResponseWriter.Write(p)
}

// Unwrap returns the wrapped writer (used by http.ResponseController).
func (rec *statusRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// logRequests logs one debug line per request.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec, ok := w.(*statusRecorder)
		if !ok {
			rec = &statusRecorder{ResponseWriter: w}
		}
		next.ServeHTTP(rec, r)
		level := slog.LevelDebug
		switch {
		case rec.code == http.StatusServiceUnavailable || rec.code == http.StatusGatewayTimeout:
			// Expected while the store has no reachable leader.
			level = slog.LevelInfo
		case rec.code >= http.StatusInternalServerError:
			level = slog.LevelWarn
		}
		attrs := []any{"method", r.Method, "uri", r.URL.RequestURI(), "identity", rec.identity}
		if rec.impersonator != "" {
			attrs = append(attrs, "impersonator", rec.impersonator)
		}
		s.log.Log(r.Context(), level, "request", append(attrs, "code", rec.code, "duration", time.Since(start))...)
	})
}

// recoverPanics turns a handler panic into a 500 Status (when nothing was
// written yet) and logs the stack; the server keeps serving.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panic", "method", r.Method, "uri", r.URL.RequestURI(),
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rec.code == 0 {
				writeError(rec, apierrors.NewInternalError(fmt.Errorf("handler panic: %v", p)))
			}
		}()
		next.ServeHTTP(rec, r)
	})
}
