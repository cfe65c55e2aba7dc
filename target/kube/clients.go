package kube

// Reaching the kube target's API: client configurations per user and host,
// the kubeconfig, the cluster CA.

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsafe/podsafe/target"
)

// RESTConfig returns a client configuration for user, connecting from host
// ("" for the harness's own address) to API server prefer first, then to
// the others when it cannot be reached (client-side load balancing: with
// several API servers a client spreads by prefer, and fails over).
func (c *Cluster) RESTConfig(user, host string, prefer int) (*rest.Config, error) {
	if c.ext != nil {
		return c.externalRESTConfig(user, host)
	}
	usr, err := c.users.get(user)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	local, ok := c.hosts[host]
	c.mu.Unlock()
	if host != "" && !ok {
		return nil, fmt.Errorf("%w: no host %q", target.ErrUnknownComponent, host)
	}
	n := len(c.lay.api)
	prefer = ((prefer % n) + n) % n
	dialer := &net.Dialer{Timeout: 3 * time.Second, KeepAlive: 5 * time.Second}
	if local.IsValid() {
		dialer.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
	}
	addrs := make([]string, 0, n)
	for k := range n {
		addrs = append(addrs, hostport(c.lay.api[(prefer+k)%n], APIServerPort))
	}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var errs []error
		for _, a := range addrs {
			conn, err := dialer.DialContext(ctx, network, a)
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
	return &rest.Config{
		Host:            c.lay.apiURL(prefer),
		BearerToken:     usr.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.lay.pki.CAPEM},
		Dial:            dial,
		QPS:             -1,
		// JSON, not client-go's default protobuf: the history's transport
		// reads the UID and resourceVersion of every answer, which it can
		// only in JSON (the authority checker matches a force deletion to
		// the store's record of the pod by that UID).
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
		// No client timeout: it would end watches; requests are bounded by
		// their contexts.
	}, nil
}

// clientFor is a clientset for user from host against API server prefer.
func (c *Cluster) clientFor(user, host string, prefer int) (kubernetes.Interface, error) {
	rc, err := c.RESTConfig(user, host, prefer)
	if err != nil {
		return nil, err
	}
	rc.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(rc)
}

// WriteKubeconfig writes an admin kubeconfig for kubectl against API server
// 0 and returns the server URL.
func (c *Cluster) WriteKubeconfig(path string) (string, error) {
	usr, err := c.users.get(AdminUser)
	if err != nil {
		return "", err
	}
	return c.lay.apiURL(0), writeKubeconfig(path, c.lay.apiURL(0), c.lay.pki.CAPEM, usr)
}

// CAPEM is the cluster CA certificate.
func (c *Cluster) CAPEM() []byte { return c.lay.pki.CAPEM }

// CertPool is the cluster CA as a pool.
func (c *Cluster) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(c.lay.pki.CAPEM)
	return p
}
