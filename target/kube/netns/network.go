package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Options configure a Network.
type Options struct {
	// Prefix starts the name of every namespace, link and table the
	// Network makes: 1 to MaxPrefixLen lower-case letters and digits, a
	// letter first, unique among the Networks alive on this machine (e.g.
	// "ps" and four characters of a run id). Cleanup takes the same prefix.
	Prefix string
	// Logger receives the cuts and heals (Info) and every command run
	// (Debug); nil discards.
	Logger *slog.Logger
}

// Host is a network host: the unit a cut separates.
type Host struct {
	// Name is the host's name in Cut's links.
	Name string
	// Namespace is the network namespace the host's processes run in
	// (ip netns exec Namespace …), or "" for a local host: one that lives
	// in the host namespace (the harness's own process).
	Namespace string
	// Addr is the host's IPv4 address on the bridge.
	Addr netip.Addr
}

// Local reports whether h lives in the host namespace (made by AddLocal).
func (h Host) Local() bool { return h.Namespace == "" }

// ErrUnknownHost: no host of the Network has the given name.
var ErrUnknownHost = errors.New("unknown host")

// ErrClosed: the Network was closed.
var ErrClosed = errors.New("network closed")

// Network is a bridge with hosts on it: namespaces made by AddHost and
// addresses of the host namespace made by AddLocal. Its methods are safe
// for concurrent use.
type Network struct {
	prefix string
	log    *slog.Logger
	subnet netip.Prefix
	gw     netip.Addr

	// op serializes the changes: adding hosts, cuts, heals, Close.
	op sync.Mutex
	// mu guards the fields below (read without op by Host and Hosts).
	mu     sync.Mutex
	hosts  []Host
	index  map[string]int // host name → position in hosts
	next   int            // the number of the next namespace host
	addr   netip.Addr     // the last address handed out
	cuts   int            // the number of the last cut
	closed bool
}

// closeTimeout bounds Close, which has no context.
const closeTimeout = time.Minute

// New makes a Network: the switch namespace with its bridge, the gateway
// link in the host namespace with the .1 address of a free /24, and the
// host namespace's table for local hosts' drops. It fails when names with
// opts.Prefix exist already (another live Network, or a killed run's
// leftovers: see Cleanup). On failure it removes what it made.
func New(ctx context.Context, opts Options) (*Network, error) {
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Network{prefix: opts.Prefix, log: log, index: map[string]int{}}
	unlock, err := machineLock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := sweepStale(ctx, log); err != nil {
		log.Warn("netns: leftovers of dead runs", "err", err)
	}
	left, err := leftovers(ctx, n.prefix)
	if err != nil {
		return nil, err
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("netns: prefix %q in use by %v (another live network, or a killed run's leftovers: netns.Cleanup removes them)", n.prefix, left)
	}
	used, err := usedPrefixes(ctx)
	if err != nil {
		return nil, err
	}
	if n.subnet, err = freeSubnet(used); err != nil {
		return nil, err
	}
	n.gw = n.subnet.Addr().Next()
	n.addr = n.gw
	if err := n.setUp(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if cerr := cleanup(cctx, n.prefix, log); cerr != nil {
			err = errors.Join(err, fmt.Errorf("netns: removing the half-made network: %w", cerr))
		}
		return nil, err
	}
	if err := writeOwner(n.prefix); err != nil {
		log.Warn("netns: a killed run would leave this network behind", "err", err)
	}
	log.Info("netns: network up", "prefix", n.prefix, "subnet", n.subnet, "gateway", n.gw)
	return n, nil
}

// setUp makes the switch, the gateway and the host table.
func (n *Network) setUp(ctx context.Context) error {
	sw, gw := switchNS(n.prefix), gwLink(n.prefix)
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "add", bridgeName, "type", "bridge"},
		{"link", "add", gw, "type", "veth", "peer", "name", gwPort, "netns", sw},
	}
	for _, s := range steps {
		if err := n.ip(ctx, s...); err != nil {
			return fmt.Errorf("netns: making the switch: %w", err)
		}
	}
	if err := noIPv6(ctx, n, sw, bridgeName, gwPort); err != nil {
		return err
	}
	if err := noIPv6(ctx, n, "", gw); err != nil {
		return err
	}
	steps = [][]string{
		{"-n", sw, "link", "set", bridgeName, "up"},
		{"-n", sw, "link", "set", gwPort, "master", bridgeName, "up"},
		{"addr", "add", netip.PrefixFrom(n.gw, n.subnet.Bits()).String(), "dev", gw},
		{"link", "set", gw, "up"},
	}
	for _, s := range steps {
		if err := n.ip(ctx, s...); err != nil {
			return fmt.Errorf("netns: making the switch: %w", err)
		}
	}
	if _, err := n.nft(ctx, "", tableScript(hostTable(n.prefix)), "-f", "-"); err != nil {
		return fmt.Errorf("netns: making the host table: %w", err)
	}
	return nil
}

// noIPv6 keeps IPv6 off links of namespace ns ("": the host namespace):
// without a link-local address no IPv6 packet goes around the IPv4 drops.
// A kernel without IPv6 needs nothing.
func noIPv6(ctx context.Context, n *Network, ns string, links ...string) error {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return nil
	}
	for _, l := range links {
		args := []string{"link", "set", l, "addrgenmode", "none"}
		if ns != "" {
			args = append([]string{"-n", ns}, args...)
		}
		if err := n.ip(ctx, args...); err != nil {
			return fmt.Errorf("netns: keeping IPv6 off %s: %w", l, err)
		}
	}
	return nil
}

// tableScript makes an inet table with an accepting input filter chain for
// the drops.
func tableScript(table string) string {
	return "table inet " + table + " {\n" +
		"\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n" +
		"}\n"
}

// Prefix returns the prefix of the Network's names.
func (n *Network) Prefix() string { return n.prefix }

// Subnet returns the Network's /24.
func (n *Network) Subnet() netip.Prefix { return n.subnet }

// BridgeAddr returns the gateway's address (the .1 of the subnet, on the
// host namespace's side of the bridge): every namespace's default route.
// A process of the host namespace that does not bind a local host's
// address speaks from it, and no cut ever drops it.
func (n *Network) BridgeAddr() netip.Addr { return n.gw }

// Host returns the host called name.
func (n *Network) Host(name string) (Host, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i, ok := n.index[name]
	if !ok {
		return Host{}, false
	}
	return n.hosts[i], true
}

// Hosts returns every host in the order they were added.
func (n *Network) Hosts() []Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Host(nil), n.hosts...)
}

// Close kills the processes still in the Network's namespaces (SIGKILL)
// and deletes the namespaces, the gateway link (and with them every veth
// and the bridge) and the host table. Heals still pending become no-ops.
// Closing twice is harmless.
func (n *Network) Close() error {
	n.op.Lock()
	defer n.op.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := cleanup(ctx, n.prefix, n.log); err != nil {
		return err
	}
	removeOwner(n.prefix)
	n.log.Info("netns: network closed", "prefix", n.prefix)
	return nil
}

// isClosed reports whether Close ran.
func (n *Network) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}
