package netns

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	const all = uint64(1<<capNetAdmin | 1<<capSysAdmin)
	found := func(string) (string, error) { return "/usr/sbin/x", nil }
	missing := func(miss string) func(string) (string, error) {
		return func(name string) (string, error) {
			if name == miss {
				return "", exec.ErrNotFound
			}
			return "/usr/sbin/" + name, nil
		}
	}
	caps := func(c uint64) func() (uint64, error) { return func() (uint64, error) { return c, nil } }
	ok := func() error { return nil }
	for _, tc := range []struct {
		name string
		s    system
		want []string // "" : no error
	}{
		{"root", system{0, caps(all), found, ok}, nil},
		{"capabilities without root", system{1000, caps(all), found, ok}, nil},
		{"user", system{1000, caps(0), found, ok}, []string{"root", "run as root"}},
		{"net admin only", system{1000, caps(1 << capNetAdmin), found, ok}, []string{"root"}},
		{"root without capabilities", system{0, caps(0), found, ok}, []string{"CAP_NET_ADMIN", "--cap-add NET_ADMIN"}},
		{"no nft", system{0, caps(all), missing("nft"), ok}, []string{"nft not found", "nftables package"}},
		{"no ip", system{0, caps(all), missing("ip"), ok}, []string{"ip not found", "iproute2 package"}},
		{"unreadable capabilities", system{0, func() (uint64, error) { return 0, errors.New("no proc") }, found, ok}, []string{"capabilities", "no proc"}},
		{"no nf_tables", system{0, caps(all), found, func() error { return errors.New("nft: exit status 1:\nError: Could not process rule\n^^^") }}, []string{"nftables does not work", "modprobe nf_tables"}},
		{"user without nft", system{1000, caps(0), missing("nft"), ok}, []string{"run as root", "nft not found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.s)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("check = nil, want an error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error has several lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, p := range []string{"ps1a2b", "a", "abcdefghij"} {
		if err := checkPrefix(p); err != nil {
			t.Errorf("checkPrefix(%q) = %v", p, err)
		}
		if len(gwLink(p)) > 15 {
			t.Errorf("gateway link %q is longer than an interface name may be", gwLink(p))
		}
	}
	for _, p := range []string{"", "1ab", "ps-1", "PS", "abcdefghijk", "a b"} {
		if checkPrefix(p) == nil {
			t.Errorf("checkPrefix(%q) = nil", p)
		}
	}
	for _, h := range []string{"etcd-0", "kube-controller-manager-2", "kubelet/node-1", "node.example:1"} {
		if err := checkHostName(h); err != nil {
			t.Errorf("checkHostName(%q) = %v", h, err)
		}
	}
	for _, h := range []string{"", `a"b`, "a b", strings.Repeat("x", 254)} {
		if checkHostName(h) == nil {
			t.Errorf("checkHostName(%q) = nil", h)
		}
	}
	if ns := hostNS("ps1", 3, "kubelet/"+strings.Repeat("n", 100)); strings.ContainsAny(ns, "/:") || len(ns) > 40 {
		t.Errorf("hostNS = %q", ns)
	}
	if !ownedBy("ps1", "ps1-sw") || ownedBy("ps1", "ps12-sw") || ownedBy("ps", "ps1-sw") {
		t.Error("ownedBy mixes prefixes")
	}
	if _, err := New(context.Background(), Options{Prefix: "Bad-Prefix"}); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("New with a bad prefix: %v", err)
	}
}

func TestFreeSubnet(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	for _, tc := range []struct {
		used []netip.Prefix
		want string
	}{
		{nil, "10.213.0.0/24"},
		{pp("192.0.2.0/24", "10.213.0.0/24"), "10.213.1.0/24"},
		{pp("10.213.0.1/32", "10.213.1.0/25"), "10.213.2.0/24"},
		{pp("10.213.0.0/23"), "10.213.2.0/24"},
		{pp("10.0.0.0/8"), ""},
	} {
		got, err := freeSubnet(tc.used)
		if tc.want == "" {
			if err == nil {
				t.Errorf("freeSubnet(%v) = %v, want an error", tc.used, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("freeSubnet(%v) = %v, %v; want %s", tc.used, got, err, tc.want)
		}
	}
	if p, ok := parseDst("default"); ok {
		t.Errorf("parseDst(default) = %v", p)
	}
	if p, ok := parseDst("10.213.4.7"); !ok || p.String() != "10.213.4.7/32" {
		t.Errorf("parseDst(host) = %v, %v", p, ok)
	}
	if a := lastAddr(netip.MustParsePrefix("10.213.7.0/24")); a.String() != "10.213.7.255" {
		t.Errorf("lastAddr = %s", a)
	}
}
