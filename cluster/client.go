package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// APIHost is the host name client configurations use; their dialer maps it to a
// member of the simulated network.
const APIHost = "podsafe-apiserver"

// ClientOptions say where a client sits on the network and which member it
// talks to first.
type ClientOptions struct {
	// Host is the client's network host (default "client-0"); partitions cut
	// hosts, so give each simulated process its own.
	Host string
	// Member is the member the client dials first. When a dial fails the client
	// moves on to the next member, as a client with several endpoints does.
	Member int
	// Timeout bounds every request (default: none; use contexts).
	Timeout time.Duration
}

// RESTConfig returns a client-go configuration for identity that reaches the
// API through the simulated network. Wrap its transport (WrapTransport) to
// record calls.
func (c *Cluster) RESTConfig(identity string, opts ClientOptions) *rest.Config {
	if opts.Host == "" {
		opts.Host = ClientHost(0)
	}
	d := &memberDialer{c: c, from: opts.Host}
	d.cur.Store(int64(opts.Member))
	rc := &rest.Config{
		Host:        "http://" + APIHost + ":" + APIPort,
		BearerToken: c.tokens[identity],
		UserAgent:   "podsafe/" + identity,
		Dial:        d.DialContext,
		// No client-side throttling: the workload's pace is the test's to set,
		// and a throttled request never sent must not look like an unknown one.
		RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(),
		Timeout:     opts.Timeout,
	}
	if c.cfg.WrapTransport != nil {
		rc.WrapTransport = c.cfg.WrapTransport(identity)
	}
	return rc
}

// Clientset returns a typed clientset for identity (see RESTConfig).
func (c *Cluster) Clientset(identity string, opts ClientOptions) (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig(identity, opts))
	if err != nil {
		return nil, fmt.Errorf("building clientset for %s: %w", identity, err)
	}
	return cs, nil
}

// memberDialer dials the API port of its current member; a failed dial moves it
// to the next member so the following request tries elsewhere.
type memberDialer struct {
	c    *Cluster
	from string
	cur  atomic.Int64
}

// DialContext implements rest.Config.Dial.
func (d *memberDialer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	n := int64(len(d.c.members))
	i := d.cur.Load() % n
	conn, err := d.c.net.Dial(ctx, d.from, MemberHost(int(i))+":"+APIPort)
	if err != nil {
		d.cur.CompareAndSwap(i, (i+1)%n)
		return nil, err
	}
	return conn, nil
}

func randomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

func defaultResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// isTransient reports errors a client retries while the cluster settles: cut or
// refused connections and timeouts.
func isTransient(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, net.ErrClosed)
}
