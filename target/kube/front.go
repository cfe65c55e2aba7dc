package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// A watch front is an HTTP front between one control-plane process and its
// API server: the process's kubeconfig names the front, which passes every
// request on with the process's own credentials. It can freeze the process's
// watches of one resource: their streams stay open and say nothing, as a
// watch whose server-side cache stopped does (etcd's watch starvation, an
// API server's stuck watch cache), while every other request, writes and
// fresh reads of that resource included, goes on. The events held come
// through when the freeze ends, in order, as a watch that caught up.
//
// Cutting the process's links cannot make that state: its writes would
// fail too. The front changes the process's network path (it reaches the
// API server through the harness), so link cuts between its host and the
// API servers do not apply while a front is in place.
type watchFront struct {
	name    string // the process it fronts
	addr    netip.Addr
	backend *url.URL
	log     *slog.Logger
	ln      net.Listener
	srv     *http.Server

	transport *http.Transport

	mu     sync.Mutex
	frozen map[string]*freeze // by resource
}

// freeze is one freeze of a resource's watches; done is closed when it
// ends, once.
type freeze struct {
	done chan struct{}
	once sync.Once
}

func (z *freeze) end() { z.once.Do(func() { close(z.done) }) }

// startWatchFront serves the front of process name on addr (port
// APIServerPort) with the API servers' serving certificate, passing
// requests to backend (an API server's URL) over connections dialed from
// local and trusting ca.
func startWatchFront(name string, addr netip.Addr, backend string, p *pki, local netip.Addr, log *slog.Logger) (*watchFront, error) {
	u, err := url.Parse(backend)
	if err != nil {
		return nil, fmt.Errorf("front of %s: backend %q: %w", name, backend, err)
	}
	cert, err := tls.LoadX509KeyPair(p.ServingCert, p.ServingKey)
	if err != nil {
		return nil, fmt.Errorf("front of %s: serving certificate: %w", name, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	dialer := &net.Dialer{Timeout: 3 * time.Second, KeepAlive: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}
	f := &watchFront{name: name, addr: addr, backend: u, log: log, frozen: map[string]*freeze{},
		transport: &http.Transport{
			DialContext:       dialer.DialContext,
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			IdleConnTimeout:   90 * time.Second,
		}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
		},
		Transport: f.transport,
		// Watches stream: pass each event on at once.
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if res := watchedResource(resp.Request); res != "" {
				resp.Body = &gatedBody{body: resp.Body, f: f, resource: res, ctx: resp.Request.Context()}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Debug("front: request failed", "front", name, "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", hostport(addr, APIServerPort))
	if err != nil {
		return nil, fmt.Errorf("front of %s: %w", name, err)
	}
	f.ln = ln
	f.srv = &http.Server{Handler: proxy, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		if err := f.srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("front stopped", "front", name, "err", err)
		}
	}()
	return f, nil
}

// URL is the front's address for the fronted process's kubeconfig.
func (f *watchFront) URL() string { return "https://" + hostport(f.addr, APIServerPort) }

// freeze holds the fronted process's watches of resource (the plural name,
// "leases") until the returned release is called.
func (f *watchFront) freeze(resource string) (release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.frozen[resource]; ok {
		return nil, fmt.Errorf("the watches of %s through the front of %s are frozen already", resource, f.name)
	}
	z := &freeze{done: make(chan struct{})}
	f.frozen[resource] = z
	f.log.Info("front: watches frozen", "front", f.name, "resource", resource)
	return func() {
		f.mu.Lock()
		if f.frozen[resource] == z {
			delete(f.frozen, resource)
		}
		f.mu.Unlock()
		z.end()
		f.log.Info("front: watches released", "front", f.name, "resource", resource)
	}, nil
}

// gate returns a channel closed when resource's watches may go on (nil
// when they are not frozen).
func (f *watchFront) gate(resource string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if z := f.frozen[resource]; z != nil {
		return z.done
	}
	return nil
}

func (f *watchFront) close() {
	f.mu.Lock()
	for res, z := range f.frozen {
		z.end()
		delete(f.frozen, res)
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		f.srv.Close()
	}
	f.transport.CloseIdleConnections()
}

// gatedBody is a watch stream that holds what it read while its resource
// is frozen, the end of the stream included.
type gatedBody struct {
	body     io.ReadCloser
	f        *watchFront
	resource string
	ctx      context.Context // the request's: ends when its client goes
	init     sync.Once
	closed   chan struct{}
	closing  sync.Once
}

func (g *gatedBody) setup() { g.init.Do(func() { g.closed = make(chan struct{}) }) }

func (g *gatedBody) Read(p []byte) (int, error) {
	g.setup()
	n, err := g.body.Read(p)
	if ch := g.f.gate(g.resource); ch != nil {
		select {
		case <-ch:
		case <-g.closed:
			return 0, io.ErrClosedPipe
		case <-g.ctx.Done():
			return 0, g.ctx.Err()
		}
	}
	return n, err
}

func (g *gatedBody) Close() error {
	g.setup()
	g.closing.Do(func() { close(g.closed) })
	return g.body.Close()
}

// watchedResource returns the resource a watch request watches ("" for
// other requests): the collection's last path segment, for the watch=true
// parameter form and the legacy /watch/ path form alike.
func watchedResource(r *http.Request) string {
	if r == nil {
		return ""
	}
	q := r.URL.Query()
	parts := strings.Split(strings.Trim(path.Clean(r.URL.Path), "/"), "/")
	// /api/v1/[watch/][namespaces/NS/]RESOURCE[/NAME] and
	// /apis/GROUP/VERSION/[watch/][namespaces/NS/]RESOURCE[/NAME].
	i := 2
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	legacy := i < len(parts) && parts[i] == "watch"
	if legacy {
		i++
	}
	if !legacy && q.Get("watch") != "true" && q.Get("watch") != "1" {
		return ""
	}
	if i+1 < len(parts) && parts[i] == "namespaces" && i+2 < len(parts) {
		i += 2
	}
	if i >= len(parts) {
		return ""
	}
	return parts[i]
}

// FreezeWatch freezes component's watches of resource (its plural name)
// until heal. The component must run behind a watch front
// (Config.WatchFronts).
func (c *Cluster) FreezeWatch(_ context.Context, component, resource string) (heal func() error, err error) {
	c.mu.Lock()
	f := c.fronts[component]
	c.mu.Unlock()
	if f == nil {
		var names []string
		for n := range c.fronts {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%s has no watch front (the cluster fronts: %v; set the kube scenario's watchFronts)", component, names)
	}
	release, err := f.freeze(resource)
	if err != nil {
		return nil, err
	}
	return func() error { release(); return nil }, nil
}
