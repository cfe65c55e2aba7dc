package simnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
)

// ServeProxy accepts real connections on ln (for example loopback TCP) and
// pipes each, both ways, to a connection dialled from host from to toAddr
// through the network, so a process outside this one can reach a simulated
// server. The network's rules apply to the simulated leg. A half-close on
// either side is passed on; an error on either side closes both.
//
// ServeProxy closes ln when ctx ends and then returns nil. If ln fails
// otherwise it returns the wrapped error. Either way it closes every proxied
// connection and waits for its goroutines before returning. Safe for
// concurrent use with any other method, with one call per listener.
func (n *Network) ServeProxy(ctx context.Context, ln net.Listener, from, toAddr string) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		<-ctx.Done()
		ln.Close()
	})
	for {
		rc, err := ln.Accept()
		if err != nil {
			if parent.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting proxied connection on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() { n.proxy(ctx, rc, from, toAddr) })
	}
}

// proxy pipes one real connection to a simulated one until both directions
// end or ctx ends.
func (n *Network) proxy(ctx context.Context, rc net.Conn, from, toAddr string) {
	defer rc.Close()
	sc, err := n.Dial(ctx, from, toAddr)
	if err != nil {
		n.log.Debug("proxied dial failed", "from", from, "to", toAddr, "err", err)
		return
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() {
		rc.Close()
		sc.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { forward(sc, rc) })
	forward(rc, sc)
	wg.Wait()
}

// forward copies src to dst. At src's EOF it half-closes dst; on an error it
// closes both, which also ends the copy in the other direction.
func forward(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if hc, ok := dst.(interface{ CloseWrite() error }); ok {
		hc.CloseWrite()
		return
	}
	dst.Close()
}
