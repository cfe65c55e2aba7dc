package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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

// WriteKubeconfig writes a kubeconfig for the admin identity that points at
// server (for example https://127.0.0.1:6443, the address ServeExternal listens
// on) and trusts caPEM.
func (c *Cluster) WriteKubeconfig(path, server string, caPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["podsafe"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.tokens[apiserver.IdentityAdmin]}
	cfg.Contexts["podsafe"] = &clientcmdapi.Context{Cluster: "podsafe", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "podsafe"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
