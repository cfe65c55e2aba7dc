package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"sync"

	"github.com/podsafe/podsafe/target"
)

// network places the cluster's processes on hosts with their own addresses
// and cuts links between them. Two implementations: network namespaces on a
// bridge with nftables drops (root), and loopback addresses without any
// fault (no root).
type network interface {
	// addHost makes a host for a process and returns its address.
	addHost(ctx context.Context, name string) (netip.Addr, error)
	// addLocal makes a host inside the harness's own process (its clients
	// bind their dialers to the address).
	addLocal(ctx context.Context, name string) (netip.Addr, error)
	// command runs a program on a host; the command's pid is the
	// program's.
	command(ctx context.Context, host, path string, args ...string) (*exec.Cmd, error)
	// cut drops the packets of links until heal.
	cut(ctx context.Context, links []target.Link) (heal func() error, err error)
	// canCut reports whether cut works here.
	canCut() bool
	// rules describes the drops in place (for logs).
	rules(ctx context.Context) string
	close() error
}

// loopbackNet gives every host its own address in 127.0.0.0/8, which Linux
// routes to the loopback interface without any set-up or privilege. Links
// cannot be cut.
type loopbackNet struct {
	mu    sync.Mutex
	base  [4]byte
	next  byte
	hosts map[string]netip.Addr
}

func newLoopbackNet(subnet byte) *loopbackNet {
	return &loopbackNet{base: [4]byte{127, 213, subnet, 0}, next: 1, hosts: map[string]netip.Addr{}}
}

func (l *loopbackNet) addHost(_ context.Context, name string) (netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.hosts[name]; ok {
		return a, nil
	}
	if l.next == 255 {
		return netip.Addr{}, fmt.Errorf("no loopback address left for host %s", name)
	}
	b := l.base
	b[3] = l.next
	l.next++
	a := netip.AddrFrom4(b)
	l.hosts[name] = a
	return a, nil
}

func (l *loopbackNet) addLocal(ctx context.Context, name string) (netip.Addr, error) {
	return l.addHost(ctx, name)
}

func (l *loopbackNet) command(ctx context.Context, _ string, path string, args ...string) (*exec.Cmd, error) {
	return exec.CommandContext(ctx, path, args...), nil
}

func (l *loopbackNet) cut(context.Context, []target.Link) (func() error, error) {
	return nil, fmt.Errorf("cutting links: %w (processes share the loopback interface; network faults need root for namespaces and nftables)", target.ErrUnsupported)
}

func (l *loopbackNet) canCut() bool                 { return false }
func (l *loopbackNet) rules(context.Context) string { return "" }
func (l *loopbackNet) close() error                 { return nil }
