package netns

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxPrefixLen is the longest Options.Prefix: the gateway link
// "<prefix>-gw" must fit Linux's 15-byte interface names.
const MaxPrefixLen = 10

var (
	prefixRE   = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	hostNameRE = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)
)

// Names inside the namespaces this package makes (the same in each).
const (
	nsTable    = "podsafe" // the drops' table in a host's namespace
	bridgeName = "br0"     // the bridge, in the switch namespace
	gwPort     = "gw"      // the gateway's port on the bridge
	hostIf     = "eth0"    // a host's interface in its namespace
	maxNameLen = 253       // the longest host name (a Kubernetes node name)
)

// checkPrefix says whether prefix can name a Network's namespaces, links
// and table: lower-case letters and digits, a letter first, at most
// MaxPrefixLen. There is no '-' in it, so "<prefix>-" names belong to one
// prefix only.
func checkPrefix(prefix string) error {
	if len(prefix) == 0 || len(prefix) > MaxPrefixLen || !prefixRE.MatchString(prefix) {
		return fmt.Errorf("netns: prefix %q: want 1 to %d lower-case letters and digits, a letter first", prefix, MaxPrefixLen)
	}
	return nil
}

// checkHostName says whether name can name a host: it appears in nftables
// comments and, sanitized, in a namespace name.
func checkHostName(name string) error {
	if len(name) == 0 || len(name) > maxNameLen || !hostNameRE.MatchString(name) {
		return fmt.Errorf("netns: host name %q: want 1 to %d letters, digits and . _ : / -", name, maxNameLen)
	}
	return nil
}

// switchNS is the name of the namespace holding the bridge.
func switchNS(prefix string) string { return prefix + "-sw" }

// gwLink is the name of the gateway link in the host namespace.
func gwLink(prefix string) string { return prefix + "-gw" }

// hostTable is the name of the table of local hosts' drops in the host
// namespace (family inet).
func hostTable(prefix string) string { return "podsafe_" + prefix }

// hostNS is the name of the namespace of host number i called name.
func hostNS(prefix string, i int, name string) string {
	s := strings.Map(func(r rune) rune {
		if r == '/' || r == ':' {
			return '_'
		}
		return r
	}, name)
	if len(s) > 32 {
		s = s[:32]
	}
	return fmt.Sprintf("%s-%d-%s", prefix, i, s)
}

// hostPort is the name of host number i's port on the bridge.
func hostPort(i int) string { return fmt.Sprintf("h%d", i) }

// ownedBy says whether a namespace name belongs to prefix.
func ownedBy(prefix, ns string) bool { return strings.HasPrefix(ns, prefix+"-") }
