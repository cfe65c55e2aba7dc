package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/podsafe/podsafe/target"
)

// healTimeout bounds a heal, which has no context.
const healTimeout = time.Minute

// maxComment is nftables' longest rule comment, less its terminating NUL.
const maxComment = 127

// Cut drops every packet of each link (From's IPv4 packets to To, every
// protocol, established connections included) until the returned heal
// runs. Each link is one rule in the receiver's input chain: in To's
// namespace ("ip saddr From drop"), or for a local To in the host table
// ("ip saddr From ip daddr To drop"). The packets leave the sender as
// usual and vanish; the sender is told nothing (see the package doc for why
// not at the sender). The rules of one Cut carry its own comment, so heal
// removes exactly them, whatever other cuts of the same links remain. Cut
// is all or nothing: an unknown host, a link from a host to itself or a
// failing rule leaves no rule behind. Heal is idempotent and does nothing
// after Close; a heal that failed may be called again.
func (n *Network) Cut(ctx context.Context, links []target.Link) (heal func() error, err error) {
	n.op.Lock()
	defer n.op.Unlock()
	if n.isClosed() {
		return nil, fmt.Errorf("netns: cut: %w", ErrClosed)
	}
	if len(links) == 0 {
		return func() error { return nil }, nil
	}
	links = slices.Clone(links)
	n.mu.Lock()
	n.cuts++
	tag := fmt.Sprintf("podsafe cut %d:", n.cuts)
	n.mu.Unlock()
	scripts, err := n.cutScripts(links, tag)
	if err != nil {
		return nil, err
	}
	spaces := make([]string, 0, len(scripts))
	for ns := range scripts {
		spaces = append(spaces, ns)
	}
	slices.Sort(spaces) // the host namespace ("") first
	for i, ns := range spaces {
		if _, err := n.nft(ctx, ns, scripts[ns], "-f", "-"); err != nil {
			err = fmt.Errorf("netns: cut %s: %w", linksString(links), err)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
			defer cancel()
			if rerr := n.removeTagged(rctx, spaces[:i], tag); rerr != nil {
				err = errors.Join(err, fmt.Errorf("netns: undoing the rules already added: %w", rerr))
			}
			return nil, err
		}
	}
	n.log.Info("netns: cut", "cut", tag, "links", linksString(links))
	healed := false
	return func() error {
		n.op.Lock()
		defer n.op.Unlock()
		if healed || n.isClosed() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), healTimeout)
		defer cancel()
		if err := n.removeTagged(ctx, spaces, tag); err != nil {
			return fmt.Errorf("netns: healing %s: %w", linksString(links), err)
		}
		healed = true
		n.log.Info("netns: healed", "cut", tag, "links", linksString(links))
		return nil
	}, nil
}

// cutScripts makes, for each namespace concerned ("": the host namespace),
// the nft script adding the drops of links with comments starting with tag.
func (n *Network) cutScripts(links []target.Link, tag string) (map[string]string, error) {
	type rule struct{ ns, chain, match, comment string }
	var rules []rule
	seen := map[target.Link]bool{}
	for _, l := range links {
		from, ok := n.Host(l.From)
		if !ok {
			return nil, fmt.Errorf("netns: cut %s→%s: %w %q", l.From, l.To, ErrUnknownHost, l.From)
		}
		to, ok := n.Host(l.To)
		if !ok {
			return nil, fmt.Errorf("netns: cut %s→%s: %w %q", l.From, l.To, ErrUnknownHost, l.To)
		}
		if from.Name == to.Name {
			return nil, fmt.Errorf("netns: cut %s→%s: a link from a host to itself", l.From, l.To)
		}
		if seen[l] {
			continue
		}
		seen[l] = true
		comment := tag + " " + from.Name + ">" + to.Name
		// A link narrowed to a port drops only the TCP traffic to that
		// port of To (its replies then never come either).
		port := ""
		if l.Port != "" {
			p, err := strconv.Atoi(l.Port)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("netns: cut %s: port %q is not a TCP port number", l, l.Port)
			}
			port = " tcp dport " + strconv.Itoa(p)
			comment += ":" + l.Port
		}
		if len(comment) > maxComment {
			comment = comment[:maxComment]
		}
		if to.Local() {
			rules = append(rules, rule{"", "input", "ip saddr " + from.Addr.String() + " ip daddr " + to.Addr.String() + port, comment})
		} else {
			rules = append(rules, rule{to.Namespace, "input", "ip saddr " + from.Addr.String() + port, comment})
		}
		if l.Port == "" {
			continue
		}
		// Both directions of those connections: what To sends back from
		// that port is dropped too, or a stream From opened before the cut
		// (an etcd watch) would go on delivering until TCP gave up.
		back := " tcp sport " + l.Port
		if from.Local() {
			rules = append(rules, rule{"", "input", "ip saddr " + to.Addr.String() + " ip daddr " + from.Addr.String() + back, comment + "<"})
		} else {
			rules = append(rules, rule{from.Namespace, "input", "ip saddr " + to.Addr.String() + back, comment + "<"})
		}
	}
	scripts := map[string]string{}
	for _, r := range rules {
		scripts[r.ns] += fmt.Sprintf("add rule inet %s %s %s counter drop comment %q\n", n.table(r.ns), r.chain, r.match, r.comment)
	}
	return scripts, nil
}

// table is the name of the drops' table in namespace ns.
func (n *Network) table(ns string) string {
	if ns == "" {
		return hostTable(n.prefix)
	}
	return nsTable
}

// nftRules is the part of nft -j list's output that matters here.
type nftRules struct {
	Nftables []struct {
		Rule *struct {
			Chain   string `json:"chain"`
			Handle  int    `json:"handle"`
			Comment string `json:"comment"`
		} `json:"rule"`
	} `json:"nftables"`
}

// removeTagged deletes, in each namespace of spaces ("": the host
// namespace), the rules whose comment starts with tag; each namespace's
// deletions are one transaction.
func (n *Network) removeTagged(ctx context.Context, spaces []string, tag string) error {
	var errs []error
	for _, ns := range spaces {
		table := n.table(ns)
		out, err := n.nft(ctx, ns, "", "-j", "-a", "list", "table", "inet", table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var list nftRules
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			errs = append(errs, fmt.Errorf("netns: reading nft -j list table inet %s: %w", table, err))
			continue
		}
		var script strings.Builder
		for _, o := range list.Nftables {
			if o.Rule != nil && strings.HasPrefix(o.Rule.Comment, tag+" ") {
				fmt.Fprintf(&script, "delete rule inet %s %s handle %d\n", table, o.Rule.Chain, o.Rule.Handle)
			}
		}
		if script.Len() == 0 {
			continue
		}
		if _, err := n.nft(ctx, ns, script.String(), "-f", "-"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Rules returns the nftables rules in force: the host namespace's table
// and every namespace host's ruleset, each under a heading line.
func (n *Network) Rules(ctx context.Context) (string, error) {
	n.op.Lock()
	defer n.op.Unlock()
	if n.isClosed() {
		return "", fmt.Errorf("netns: rules: %w", ErrClosed)
	}
	var b strings.Builder
	out, err := n.nft(ctx, "", "", "-a", "list", "table", "inet", hostTable(n.prefix))
	if err != nil {
		return "", fmt.Errorf("netns: rules: %w", err)
	}
	fmt.Fprintf(&b, "# host namespace (local hosts)\n%s", out)
	for _, h := range n.Hosts() {
		if h.Local() {
			continue
		}
		out, err := n.nft(ctx, h.Namespace, "", "-a", "list", "ruleset")
		if err != nil {
			return "", fmt.Errorf("netns: rules of %s: %w", h.Name, err)
		}
		fmt.Fprintf(&b, "# %s (namespace %s, %s)\n%s", h.Name, h.Namespace, h.Addr, out)
	}
	return b.String(), nil
}

// linksString formats links for errors and logs.
func linksString(links []target.Link) string {
	parts := make([]string, len(links))
	for i, l := range links {
		parts[i] = l.From + "→" + l.To
	}
	return strings.Join(parts, ", ")
}
