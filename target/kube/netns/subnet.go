package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// subnets is where a Network's /24 comes from.
var subnets = netip.MustParsePrefix("10.213.0.0/16")

// lockPath serializes Networks being made on this machine (by any process)
// so that two never take the same /24 or prefix.
const lockPath = "/run/podsafe-netns.lock"

// machineLock takes the machine-wide lock, waiting for it until ctx ends.
// The returned function releases it.
func machineLock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		// No /run (or not writable): the temporary directory is shared by
		// the processes that could race.
		f, err = os.OpenFile(filepath.Join(os.TempDir(), "podsafe-netns.lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("netns: lock file: %w", err)
		}
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("netns: locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("netns: waiting for %s: %w", f.Name(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// usedPrefixes lists the IPv4 prefixes of this namespace's addresses and
// routes (other than the default route).
func usedPrefixes(ctx context.Context) ([]netip.Prefix, error) {
	out, err := run(ctx, nil, "", "ip", "-j", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := unmarshalIP(out, &links); err != nil {
		return nil, fmt.Errorf("netns: reading ip -j addr: %w", err)
	}
	var used []netip.Prefix
	for _, l := range links {
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil || !addr.Is4() {
				continue
			}
			if p, err := addr.Prefix(a.PrefixLen); err == nil {
				used = append(used, p)
			}
		}
	}
	out, err = run(ctx, nil, "", "ip", "-j", "-4", "route", "show")
	if err != nil {
		return nil, err
	}
	var routes []struct {
		Dst string `json:"dst"`
	}
	if err := unmarshalIP(out, &routes); err != nil {
		return nil, fmt.Errorf("netns: reading ip -j route: %w", err)
	}
	for _, r := range routes {
		if p, ok := parseDst(r.Dst); ok {
			used = append(used, p)
		}
	}
	return used, nil
}

// parseDst parses a route's destination ("10.0.0.0/8", "10.1.2.3");
// "default" and anything else not an IPv4 prefix is not one.
func parseDst(dst string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(dst); err == nil && p.Addr().Is4() {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(dst); err == nil && a.Is4() {
		return netip.PrefixFrom(a, 32), true
	}
	return netip.Prefix{}, false
}

// freeSubnet returns the first /24 of subnets that overlaps none of used.
func freeSubnet(used []netip.Prefix) (netip.Prefix, error) {
	base := subnets.Addr().As4()
	for i := 0; i < 256; i++ {
		b := base
		b[2] = byte(i)
		cand := netip.PrefixFrom(netip.AddrFrom4(b), 24)
		free := true
		for _, u := range used {
			if cand.Overlaps(u) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("netns: no free /24 in %s: every one overlaps an address or route of this machine (ip addr; ip route)", subnets)
}

// unmarshalIP decodes ip -j output; ip prints nothing for an empty list.
func unmarshalIP(out string, v any) error {
	if len(out) == 0 || out == "\n" {
		return nil
	}
	return json.Unmarshal([]byte(out), v)
}
