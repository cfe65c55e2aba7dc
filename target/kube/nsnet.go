package kube

import (
	"context"
	"net/netip"
	"os/exec"

	"github.com/podsafe/podsafe/target"
	"github.com/podsafe/podsafe/target/kube/netns"
)

// nsNet is the network of network namespaces on a bridge (package netns).
type nsNet struct{ n *netns.Network }

func (s *nsNet) addHost(ctx context.Context, name string) (netip.Addr, error) {
	h, err := s.n.AddHost(ctx, name)
	return h.Addr, err
}

func (s *nsNet) addLocal(ctx context.Context, name string) (netip.Addr, error) {
	h, err := s.n.AddLocal(ctx, name)
	return h.Addr, err
}

func (s *nsNet) command(ctx context.Context, host, path string, args ...string) (*exec.Cmd, error) {
	return s.n.Command(ctx, host, path, args...)
}

func (s *nsNet) cut(ctx context.Context, links []target.Link) (func() error, error) {
	return s.n.Cut(ctx, links)
}

func (s *nsNet) canCut() bool { return true }

func (s *nsNet) rules(ctx context.Context) string {
	r, err := s.n.Rules(ctx)
	if err != nil {
		return err.Error()
	}
	return r
}

func (s *nsNet) close() error { return s.n.Close() }
