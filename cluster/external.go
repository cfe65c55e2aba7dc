package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/podsafe/podsafe/apiserver"
)

// ExternalHost is the network host of connections that come from outside the
// process (curl, kubectl) through ServeExternal.
const ExternalHost = "external"

// ServeExternal accepts real connections on ln (a loopback TCP listener) and
// pipes each to a member's API server through the simulated network, trying the
// next member when one cannot be reached. It returns when ctx ends or ln fails.
func (c *Cluster) ServeExternal(ctx context.Context, ln net.Listener) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() {
		// Closing the listener ends Accept; closing the open connections ends
		// their pipes, so clients holding idle keep-alive connections cannot
		// keep the cluster up.
		ln.Close()
		mu.Lock()
		for conn := range conns {
			conn.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accepting external connection: %w", err)
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			conn.Close()
			continue
		}
		conns[conn] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				mu.Lock()
				delete(conns, conn)
				mu.Unlock()
				conn.Close()
			}()
			var (
				inner net.Conn
				derr  error
			)
			for range c.members {
				i := int(next.Add(1)) % len(c.members)
				inner, derr = c.net.Dial(ctx, ExternalHost, MemberHost(i)+":"+APIPort)
				if derr == nil {
					break
				}
			}
			if inner == nil {
				c.log.Warn("no member reachable for an external connection", "err", derr)
				return
			}
			defer inner.Close()
			pipe(conn, inner)
		}()
	}
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// AdminContext is the kubeconfig context WriteKubeconfig makes current: the
// admin identity.
const AdminContext = "podsafe"

// WriteKubeconfig writes a kubeconfig that points at server (for example
// https://127.0.0.1:6443, the address ServeExternal listens on) and trusts
// caPEM, with mode 0600: it holds every identity's token. Its current
// context, AdminContext, is admin's; every identity also has a user and a
// context of its own name (admin, scheduler, pet-controller, ...,
// kubelet:NODE), so kubectl --context pet-controller acts as the pet
// controller and meets its authority rules. It returns the contexts'
// names, current first.
func (c *Cluster) WriteKubeconfig(path, server string, caPEM []byte) ([]string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["podsafe"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[apiserver.IdentityAdmin] = &clientcmdapi.AuthInfo{Token: c.tokens[apiserver.IdentityAdmin]}
	cfg.Contexts[AdminContext] = &clientcmdapi.Context{Cluster: "podsafe", AuthInfo: apiserver.IdentityAdmin, Namespace: "default"}
	cfg.CurrentContext = AdminContext
	contexts := []string{AdminContext}
	for _, id := range c.identities() {
		cfg.AuthInfos[id] = &clientcmdapi.AuthInfo{Token: c.tokens[id]}
		cfg.Contexts[id] = &clientcmdapi.Context{Cluster: "podsafe", AuthInfo: id, Namespace: "default"}
		contexts = append(contexts, id)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return nil, fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	// WriteToFile keeps the mode of a file that was there.
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return contexts, nil
}

// identities lists the identities with a token: the components in
// Identities order, then the other identities (the kubelets) sorted.
func (c *Cluster) identities() []string {
	var out, rest []string
	for _, id := range Identities {
		if _, ok := c.tokens[id]; ok {
			out = append(out, id)
		}
	}
	for id := range c.tokens {
		if !slices.Contains(Identities, id) {
			rest = append(rest, id)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
