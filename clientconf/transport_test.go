package clientconf

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// requestCounts counts an informer factory's requests by verb and
// resource, and the answers that were not 200: it shows how often the
// faults made the informers list and watch again. The verbs: LIST, WATCH
// (resuming from a resourceVersion) and WATCHLIST (a watch that begins with
// the current state, sendInitialEvents=true: client-go's list).
type requestCounts struct {
	mu     sync.Mutex
	counts map[string]int // "WATCH pods", "WATCHLIST pods", "WATCH pods 410", "LIST pods error"
}

func newRequestCounts() *requestCounts { return &requestCounts{counts: map[string]int{}} }

// wrap is a rest.Config.WrapTransport.
func (c *requestCounts) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		verb := "LIST"
		if w := q.Get("watch"); w == "true" || w == "1" {
			verb = "WATCH"
			if q.Get("sendInitialEvents") == "true" {
				verb = "WATCHLIST"
			}
		}
		key := verb + " " + resourceOf(req.URL.Path)
		resp, err := rt.RoundTrip(req)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.counts[key]++
		switch {
		case err != nil:
			c.counts[key+" error"]++
		case resp.StatusCode != http.StatusOK:
			c.counts[fmt.Sprintf("%s %d", key, resp.StatusCode)]++
		}
		return resp, err
	})
}

// lists is how many times the informer of resource listed (LIST or
// WATCHLIST), and watches how many watches of either kind it opened.
func (c *requestCounts) lists(resource string) int {
	return c.get("LIST "+resource) + c.get("WATCHLIST "+resource)
}

func (c *requestCounts) watches(resource string) int {
	return c.get("WATCH "+resource) + c.get("WATCHLIST "+resource)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// resourceOf is the last resource segment of a collection path
// (/api/v1/pods, /apis/apps/v1/namespaces/x/replicasets).
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	return parts[len(parts)-1]
}

// get returns the count under key.
func (c *requestCounts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

// summary is the counts, sorted by key.
func (c *requestCounts) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k := range c.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.counts[k]))
	}
	return strings.Join(parts, ", ")
}

// dialTracker remembers the member a client's last connection went to, so
// that a fault can aim at the member a client really uses (its dialer
// moves on to the next member when a dial fails, and stays there).
type dialTracker struct {
	mu   sync.Mutex
	host string
}

// wrap wraps a rest.Config's Dial.
func (d *dialTracker) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil {
			host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
			d.mu.Lock()
			d.host = host
			d.mu.Unlock()
		}
		return conn, err
	}
}

// member is the index of the member last dialled, or -1.
func (d *dialTracker) member(hosts []string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Index(hosts, d.host)
}
