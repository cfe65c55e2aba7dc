package simnet

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// dialWithin dials from host from to addr and reports whether the dial
// succeeded within d of (fake) time.
func dialWithin(t *testing.T, n *Network, from, addr string, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := n.Dial(ctx, from, addr)
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial(%s, %s) = %v, want success or a stall", from, addr, err)
		}
		return false
	}
	c.Close()
	return true
}

func TestCutPortCutsOneFlowOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{})
		echo(t, listen(t, n, "b:1"))
		echo(t, listen(t, n, "b:2"))
		echo(t, listen(t, n, "a:3"))
		if err := n.CutPort("a", "b:1"); err != nil {
			t.Fatal(err)
		}
		if dialWithin(t, n, "a", "b:1", time.Second) {
			t.Error("dial a->b:1 across a port cut succeeded")
		}
		for _, d := range []struct{ from, to string }{{"a", "b:2"}, {"b", "a:3"}, {"c", "b:1"}} {
			if !dialWithin(t, n, d.from, d.to, time.Second) {
				t.Errorf("dial %s->%s stalled; only a->b:1 is cut", d.from, d.to)
			}
		}
		if diff := cmp.Diff([]PortRule{{From: "a", To: "b:1", Cut: true}}, n.PortRules()); diff != "" {
			t.Errorf("PortRules (-want +got):\n%s", diff)
		}
		if len(n.Rules()) != 0 {
			t.Errorf("a port cut shows as host rules: %v", n.Rules())
		}
		if err := n.HealPort("a", "b:1"); err != nil {
			t.Fatal(err)
		}
		if !dialWithin(t, n, "a", "b:1", time.Second) {
			t.Error("dial a->b:1 after HealPort stalled")
		}
	})
}

// A port cut holds the bytes of connections already open on the flow, both
// ways, and fails them after the detection timeout like any cut.
func TestCutPortHoldsOpenConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{DetectTimeout: 2 * time.Second})
		ln1 := listen(t, n, "b:1")
		ln2 := listen(t, n, "b:2")
		c1, s1 := connect(t, n, ln1, "a")
		c2, s2 := connect(t, n, ln2, "a")
		r := startReader(t, s1)
		back := startReader(t, c1)
		n.CutPort("a", "b:1")
		c1.Write([]byte("held"))
		s1.Write([]byte("held back"))
		r.start()
		back.start()
		time.Sleep(time.Second)
		if res, ok := r.poll(); ok {
			t.Fatalf("Read across a port cut returned %+v, want a stall", res)
		}
		if res, ok := back.poll(); ok {
			t.Fatalf("Read back across a port cut returned %+v, want a stall", res)
		}
		roundTrip(t, c2, s2, "other port flows")
		n.HealAll() // lifts port cuts too
		if res, ok := r.poll(); !ok || res.data != "held" {
			t.Fatalf("Read after HealAll = %+v, %v; want the held bytes", res, ok)
		}
		if res, ok := back.poll(); !ok || res.data != "held back" {
			t.Fatalf("Read back after HealAll = %+v, %v; want the held bytes", res, ok)
		}
		if len(n.PortRules()) != 0 {
			t.Errorf("port rules after HealAll: %v", n.PortRules())
		}
	})
}

// A port cut on a flow over a cut host link: each layer heals on its own.
func TestPortAndHostRulesLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{})
		echo(t, listen(t, n, "b:1"))
		n.Cut("a", "b")
		n.CutPort("a", "b:1")
		n.Heal("a", "b")
		if dialWithin(t, n, "a", "b:1", time.Second) {
			t.Error("dial succeeded while the port cut is in force")
		}
		n.Cut("b", "a")
		n.HealPort("a", "b:1")
		if dialWithin(t, n, "a", "b:1", time.Second) {
			t.Error("dial succeeded while the host link b->a is cut")
		}
		n.Heal("b", "a")
		if !dialWithin(t, n, "a", "b:1", time.Second) {
			t.Error("dial stalled with no rule in force")
		}
	})
}

// Holds outlast every ordinary heal and are counted.
func TestHoldsOutlastHeals(t *testing.T) {
	heals := map[string]func(n *Network){
		"Heal":        func(n *Network) { n.Heal("a", "b"); n.Heal("b", "a") },
		"HealAll":     func(n *Network) { n.HealAll() },
		"Reset":       func(n *Network) { n.Reset() },
		"HealPort":    func(n *Network) { n.HealPort("a", "b:1") },
		"UnfenceHost": func(n *Network) { n.FenceHost("a"); n.UnfenceHost("a") },
	}
	holds := map[string]struct{ hold, release func(n *Network) }{
		"HoldHost dialler":  {func(n *Network) { n.HoldHost("a") }, func(n *Network) { n.ReleaseHost("a") }},
		"HoldHost listener": {func(n *Network) { n.HoldHost("b") }, func(n *Network) { n.ReleaseHost("b") }},
		"HoldPort":          {func(n *Network) { n.HoldPort("a", "b:1") }, func(n *Network) { n.ReleasePort("a", "b:1") }},
	}
	for hname, h := range holds {
		for name, heal := range heals {
			t.Run(hname+"/"+name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					n := newNet(t, Options{DetectTimeout: time.Hour})
					ln := listen(t, n, "b:1")
					c, s := connect(t, n, ln, "a")
					r := startReader(t, s)
					h.hold(n)
					h.hold(n)
					heal(n)
					c.Write([]byte("x"))
					r.start()
					if res, ok := r.poll(); ok {
						t.Fatalf("Read on a held flow after %s returned %+v", name, res)
					}
					if dialWithin(t, n, "a", "b:1", time.Second) {
						t.Fatalf("dial on a held flow after %s succeeded", name)
					}
					h.release(n)
					if res, ok := r.poll(); ok {
						t.Fatalf("Read returned %+v after one of two releases", res)
					}
					h.release(n)
					if res, ok := r.poll(); !ok || res.data != "x" {
						t.Fatalf("Read after the releases = %+v, %v; want the held byte", res, ok)
					}
					if !dialWithin(t, n, "a", "b:1", time.Second) {
						t.Error("dial after the releases stalled")
					}
					if len(n.PortRules()) != 0 {
						t.Errorf("port rules after the releases: %v", n.PortRules())
					}
				})
			})
		}
	}
}

// Releasing a hold leaves the host rules that are in force.
func TestReleaseKeepsHostRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{})
		echo(t, listen(t, n, "b:1"))
		n.HoldHost("a")
		if !n.Held("a") || n.Held("b") {
			t.Errorf("Held(a), Held(b) = %v, %v; want true, false", n.Held("a"), n.Held("b"))
		}
		n.Cut("a", "b")
		n.ReleaseHost("a")
		if n.Held("a") {
			t.Error("Held(a) after ReleaseHost")
		}
		if dialWithin(t, n, "a", "b:1", time.Second) {
			t.Error("dial succeeded while a->b is cut")
		}
		if diff := cmp.Diff([]string{"a->b cut"}, ruleStrings(n.Rules())); diff != "" {
			t.Errorf("Rules (-want +got):\n%s", diff)
		}
	})
}

func ruleStrings(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.String())
	}
	return out
}

func TestPortRules(t *testing.T) {
	n := New(Options{})
	defer n.Close()
	n.CutPort("a", "b:1")
	n.HoldPort("a", "b:1")
	n.HoldPort("c", "b:2")
	n.HoldHost("d")
	n.HoldHost("d")
	want := []string{"d held×2", "a->b:1 cut held×1", "c->b:2 held×1"}
	var got []string
	for _, r := range n.PortRules() {
		got = append(got, r.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PortRules (-want +got):\n%s", diff)
	}
	for _, bad := range []struct{ from, to string }{{"a", "b"}, {"", "b:1"}, {"a", "b:x"}} {
		if err := n.CutPort(bad.from, bad.to); !errors.Is(err, ErrBadAddress) {
			t.Errorf("CutPort(%q, %q) = %v, want ErrBadAddress", bad.from, bad.to, err)
		}
	}
}
