package netns

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// AddHost makes a host with a namespace of its own: a veth pair whose end
// eth0 in the namespace has the next free address of the subnet and whose
// other end is a port of the bridge, lo and eth0 up, a default route via
// BridgeAddr, and an nftables table with an input filter chain for the
// drops. Adding a name again returns the host made first; a name
// already taken by a local host is an error. On failure AddHost removes
// what it made.
func (n *Network) AddHost(ctx context.Context, name string) (Host, error) {
	n.op.Lock()
	defer n.op.Unlock()
	h, i, existing, err := n.reserve(name, false)
	if err != nil || existing {
		return h, err
	}
	if err := n.setUpHost(ctx, h, i); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if derr := deleteNamespace(cctx, n.log, h.Namespace); derr != nil {
			err = fmt.Errorf("%w (and removing it: %v)", err, derr)
		}
		return Host{}, fmt.Errorf("netns: adding host %s: %w", name, err)
	}
	n.commit(h)
	n.log.Info("netns: host added", "host", name, "namespace", h.Namespace, "addr", h.Addr)
	return h, nil
}

// setUpHost makes host number i's namespace, link, address, route and
// table.
func (n *Network) setUpHost(ctx context.Context, h Host, i int) error {
	sw, port := switchNS(n.prefix), hostPort(i)
	if err := n.ip(ctx, "netns", "add", h.Namespace); err != nil {
		return err
	}
	if err := n.ipIn(ctx, sw, "link", "add", port, "type", "veth", "peer", "name", hostIf, "netns", h.Namespace); err != nil {
		return err
	}
	if err := noIPv6(ctx, n, sw, port); err != nil {
		return err
	}
	if err := noIPv6(ctx, n, h.Namespace, hostIf); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", sw, "link", "set", port, "master", bridgeName, "up"},
		{"-n", h.Namespace, "addr", "add", netip.PrefixFrom(h.Addr, n.subnet.Bits()).String(), "dev", hostIf},
		{"-n", h.Namespace, "link", "set", "lo", "up"},
		{"-n", h.Namespace, "link", "set", hostIf, "up"},
		{"-n", h.Namespace, "route", "add", "default", "via", n.gw.String(), "dev", hostIf},
	}
	for _, s := range steps {
		if err := n.ip(ctx, s...); err != nil {
			return err
		}
	}
	_, err := n.nft(ctx, h.Namespace, tableScript(nsTable), "-f", "-")
	return err
}

// AddLocal makes a host that lives in the host namespace: a new address of
// the subnet (a /32) on the gateway link. Its Namespace is "". Cuts match
// its packets by their source address, so an in-process client of this
// host must bind its dialer's local address to Addr, e.g.
//
//	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: h.Addr.AsSlice()}}
//
// (a client that binds nothing speaks from BridgeAddr and is never cut),
// and a server of this host listens on Addr. Adding a name again returns
// the host made first; a name already taken by a namespace host is an
// error.
func (n *Network) AddLocal(ctx context.Context, name string) (Host, error) {
	n.op.Lock()
	defer n.op.Unlock()
	h, _, existing, err := n.reserve(name, true)
	if err != nil || existing {
		return h, err
	}
	if err := n.ip(ctx, "addr", "add", netip.PrefixFrom(h.Addr, 32).String(), "dev", gwLink(n.prefix)); err != nil {
		return Host{}, fmt.Errorf("netns: adding local host %s: %w", name, err)
	}
	n.commit(h)
	n.log.Info("netns: local host added", "host", name, "addr", h.Addr)
	return h, nil
}

// reserve checks name and picks the next address (and for a namespace
// host, number and namespace name) for it; existing says that a host of
// that kind has the name already (h is that host). The address is used up
// even when the host fails to come up.
func (n *Network) reserve(name string, local bool) (h Host, i int, existing bool, err error) {
	if err := checkHostName(name); err != nil {
		return Host{}, 0, false, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Host{}, 0, false, fmt.Errorf("netns: adding host %s: %w", name, ErrClosed)
	}
	if j, ok := n.index[name]; ok {
		h := n.hosts[j]
		if h.Local() != local {
			return Host{}, 0, false, fmt.Errorf("netns: host %s exists already as a %s host", name, kind(h))
		}
		return h, 0, true, nil
	}
	next := n.addr.Next()
	if !n.subnet.Contains(next) || next == lastAddr(n.subnet) {
		return Host{}, 0, false, fmt.Errorf("netns: adding host %s: no address left in %s", name, n.subnet)
	}
	n.addr = next
	h = Host{Name: name, Addr: next}
	if !local {
		n.next++
		i = n.next
		h.Namespace = hostNS(n.prefix, i, name)
	}
	return h, i, false, nil
}

// commit records a host that came up.
func (n *Network) commit(h Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.index[h.Name] = len(n.hosts)
	n.hosts = append(n.hosts, h)
}

// kind names a host's kind for errors.
func kind(h Host) string {
	if h.Local() {
		return "local"
	}
	return "namespace"
}

// lastAddr is the broadcast address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Command returns a command that runs program name with args on host: in
// its namespace for a namespace host ("ip netns exec NAMESPACE program
// args…": ip enters the namespace and execs the program in its own place,
// so cmd.Process.Pid is the program's pid and signals reach it directly),
// or as a plain command for a local host. A name without a slash is looked
// up in PATH here. The command is exec.CommandContext's: ctx's end kills
// it. Close kills what is still running in the namespaces.
func (n *Network) Command(ctx context.Context, host, name string, args ...string) (*exec.Cmd, error) {
	if n.isClosed() {
		return nil, fmt.Errorf("netns: command on %s: %w", host, ErrClosed)
	}
	h, ok := n.Host(host)
	if !ok {
		return nil, fmt.Errorf("netns: command on %s: %w %q", host, ErrUnknownHost, host)
	}
	if h.Local() {
		return exec.CommandContext(ctx, name, args...), nil
	}
	path := name
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("netns: command on %s: %w", host, err)
		}
		path = p
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Namespace, path}, args...)...), nil
}
