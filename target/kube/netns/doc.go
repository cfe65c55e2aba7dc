// Package netns gives podsafe's real-Kubernetes target (package target/kube)
// its network: every control-plane process runs in a Linux network namespace
// of its own, all namespaces hang off one bridge, and partitions are kernel
// packet drops made with nftables.
//
// # Layout
//
// A Network owns a private /24 (the first of 10.213.0.0/24 …
// 10.213.255.0/24 that no interface or route of this machine overlaps) and
// a prefix (Options.Prefix, e.g. "ps1a2b") from which every name it makes is
// derived:
//
//	namespace <prefix>-sw        the switch: a bridge br0 and nothing else
//	link      <prefix>-gw        in the host namespace, the gateway: a veth
//	                             whose peer is a port of br0; it holds the
//	                             .1 address (BridgeAddr) and every local
//	                             host's address (/32)
//	namespace <prefix>-<i>-<name> one per host made by AddHost: eth0 with the
//	                             host's address, whose veth peer h<i> is a
//	                             port of br0; default route via .1
//	table     inet podsafe       in each host namespace: the drops of
//	                             packets to the host
//	table     inet podsafe_<prefix> in the host namespace: the drops of
//	                             packets to local hosts
//
// The bridge lives in a namespace of its own rather than in the host
// namespace so that the host's firewall cannot see the traffic between
// namespaces: with br_netfilter loaded (Docker and Kubernetes nodes load
// it) bridged IPv4 packets of a host-namespace bridge go through the host's
// forward hook, where a FORWARD policy of DROP (Docker's) would silently
// cut every namespace from every other. The switch namespace has no
// firewall rules, so forwarding never depends on the host's. Traffic of
// local hosts (AddLocal) does enter the host namespace and passes its
// input and output hooks like any local traffic: a host firewall that
// drops incoming connections on <prefix>-gw would have to allow them.
// Namespaces cannot reach beyond the /24 (the host does not forward them
// anywhere), and IPv6 is kept off every interface (no link-local address),
// so that IPv4 drops cut everything.
//
// # Cuts
//
// Cut drops every packet of a link From → To at the receiver, in the input
// hook: in To's namespace ("ip saddr From drop"), or for a local To in the
// host namespace's table ("ip saddr From ip daddr To drop"). Every IPv4
// packet is dropped, established connections included.
//
// Packets are dropped, never rejected: a real partition is silence, so
// peers see connection attempts time out and established connections
// stall (TCP keeps retransmitting and resumes after heal), rather than the
// immediate "connection refused" or reset a REJECT would give, which would
// let software detect the fault at once and fail in ways a real network
// never makes it.
//
// The drop is at the receiver, not at the sender, for the same reason: the
// kernel reports a packet dropped in the sender's output (or postrouting)
// hook to the sending socket — a UDP send fails with EPERM, "operation not
// permitted" — and one dropped at its interface's egress as ENOBUFS. A
// packet dropped on arrival leaves its sender none the wiser, as on a real
// network.
//
// A one-way cut From → To drops only From's packets to To. Datagrams from
// To still reach From, but TCP needs both directions: To cannot connect to
// From either (From's SYN-ACK is dropped), and a connection stalls whichever
// side sends.
//
// Every rule carries a comment naming the cut it belongs to ("podsafe cut
// N: from>to"); heal deletes the rules with its own comment and no other, so
// overlapping cuts of the same link heal independently.
//
// # Requirements
//
// Root (CAP_NET_ADMIN and CAP_SYS_ADMIN), the ip (iproute2) and nft
// (nftables) programs, and a kernel with network namespaces, veth, bridge
// and nf_tables (any distribution kernel). Check reports what is missing.
package netns
