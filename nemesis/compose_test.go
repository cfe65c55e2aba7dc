package nemesis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/target"
)

// composedParts is a composed schedule of every kind of fault, each kind a
// part on its own timer, and one more part that reaches for the kubelets the
// kill and pause parts reach for, so that draws conflict.
func composedParts(t *testing.T, mean time.Duration) []nemesis.Part {
	t.Helper()
	var parts []nemesis.Part
	for i, names := range []string{"partition,node-partition", "kill", "pause", "clock", "slow", "lose-node,failpoint",
		"kill-kubelet,pause-kubelet,clock-skew"} {
		fs, err := nemesis.Lookup(names)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, nemesis.Part{Name: names, Faults: fs, Interval: mean + time.Duration(i)*time.Millisecond})
	}
	return parts
}

// runRecorded runs s, recording into a fresh history, on tgt until it has
// injected n faults (or for 20 s), heals, and returns the loaded history.
func runRecorded(t *testing.T, s *nemesis.Schedule, tgt target.Target, rng *rand.Rand, n int) *history.History {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.Recorder = rec
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, tgt, rng) }()
	for s.Injected() < n && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runComposed runs composedParts on a fresh fake target until it has
// injected n faults and returns the target, the schedule and the history.
func runComposed(t *testing.T, seed uint64, n int) (*fakeTarget, *nemesis.Schedule, *history.History) {
	t.Helper()
	f := kubeLike(everything())
	s := &nemesis.Schedule{Parts: composedParts(t, 4*time.Millisecond), Interval: time.Second}
	h := runRecorded(t, s, richTarget{f}, rand.New(rand.NewPCG(seed, seed)), n)
	return f, s, h
}

// overlap reports whether two intervals were in force at once.
func overlap(a, b history.Interval) bool { return a.Start < b.End && b.Start < a.End }

// TestComposedOverlapsWithoutConflict: the parts' faults overlap, kinds
// mixed; no two faults in force at once act on one component, cut one
// link or switch one failpoint; every injection is recorded with its
// effect, what it acted on and its parameters, and healed by the end.
func TestComposedOverlapsWithoutConflict(t *testing.T) {
	f, s, h := runComposed(t, 7, 150)
	t.Logf("injections %v, skipped %d", s.Counts(), s.Skipped())

	if f.cutNow() != nil || len(f.down) != 0 || len(f.paused) != 0 || len(f.offsets) != 0 || len(f.off) != 0 {
		t.Errorf("left behind: cut %v, down %v, paused %v, clocks %v, off %v", f.cutNow(), f.down, f.paused, f.offsets, f.off)
	}
	if len(s.Active()) != 0 {
		t.Errorf("active after the end: %v", s.Active())
	}
	if len(h.Nemesis) != s.Injected() || s.Injected() < 150 {
		t.Fatalf("%d intervals for %d injections; want every injection recorded, and some", len(h.Nemesis), s.Injected())
	}
	if s.Skipped() == 0 {
		t.Errorf("no draw was skipped, yet the last part reaches for what the kill and pause parts hold")
	}

	byName := map[string]nemesis.Fault{}
	for _, fl := range nemesis.All() {
		byName[fl.Name()] = fl
	}
	mixed := map[[2]history.FaultEffect]bool{}
	for i, a := range h.Nemesis {
		if !a.Healed {
			t.Errorf("%s (%s) never healed", a.Name, a.Description)
		}
		if a.Effect == "" || a.Effect != nemesis.EffectOf(byName[a.Name]) {
			t.Errorf("%s records effect %q", a.Name, a.Effect)
		}
		if len(a.Links) == 0 && len(a.Components) == 0 && a.Params[history.ParamFailpoint] == "" {
			t.Errorf("%s (%s) records nothing it acted on", a.Name, a.Description)
		}
		for _, b := range h.Nemesis[i+1:] {
			if !overlap(a, b) {
				continue
			}
			if a.Effect != b.Effect {
				mixed[[2]history.FaultEffect{min(a.Effect, b.Effect), max(a.Effect, b.Effect)}] = true
			}
			for _, c := range a.Components {
				if slices.Contains(b.Components, c) {
					t.Errorf("%s (%s) and %s (%s) both act on %s at once", a.Name, a.Description, b.Name, b.Description, c)
				}
			}
			for _, l := range a.Links {
				if slices.Contains(b.Links, l) {
					t.Errorf("%s (%s) and %s (%s) both cut %s at once", a.Name, a.Description, b.Name, b.Description, l)
				}
			}
			if fp := a.Params[history.ParamFailpoint]; fp != "" && fp == b.Params[history.ParamFailpoint] {
				t.Errorf("failpoint %s switched on twice at once", fp)
			}
		}
	}
	if len(mixed) < 5 {
		t.Errorf("faults of different kinds overlapped only as %v; want many pairs", mixed)
	}
}

// TestComposedDeterministic: a composed schedule draws the same faults
// with the same parameters, in the same order, from the same seed (the
// shorter run's injections begin the longer's).
func TestComposedDeterministic(t *testing.T) {
	seq := func(n int) []string {
		_, _, h := runComposed(t, 11, n)
		ivs := slices.Clone(h.Nemesis)
		slices.SortFunc(ivs, func(a, b history.Interval) int { return int(a.ID) - int(b.ID) })
		var out []string
		for _, iv := range ivs {
			out = append(out, fmt.Sprintf("%s %s %v %v", iv.Name, iv.Description, iv.Params, iv.Nodes))
		}
		return out
	}
	a, b := seq(40), seq(80)
	if len(a) < 40 || len(b) < len(a) {
		t.Fatalf("%d then %d injections; want some, and more in the longer run", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("injection %d differs:\n%s\n%s", i+1, a[i], b[i])
		}
	}
	if c := seq(40); len(c) < 40 || !slices.Equal(c[:40], a[:40]) {
		t.Errorf("a third run differs in its first injections")
	}
}

// A part whose faults the target cannot do waits; the others run. A
// schedule given both Faults and Parts refuses to run.
func TestComposedUnavailablePart(t *testing.T) {
	ring, kill := fault(t, "ring"), fault(t, "kill-kubelet")
	f := kubeLike(everything())
	s := &nemesis.Schedule{Parts: []nemesis.Part{{Faults: []nemesis.Fault{ring}}, {Faults: []nemesis.Fault{kill}}}, Interval: 2 * time.Millisecond}
	h := runRecorded(t, s, richTarget{f}, seeded(), 5)
	for _, iv := range h.Nemesis {
		if iv.Name != "kill-kubelet" {
			t.Errorf("injected %s on three members", iv.Name)
		}
	}
	if len(h.Nemesis) < 5 {
		t.Errorf("%d injections, want the available part's", len(h.Nemesis))
	}

	both := &nemesis.Schedule{Faults: []nemesis.Fault{kill}, Parts: []nemesis.Part{{Faults: []nemesis.Fault{kill}}}}
	if err := both.Run(context.Background(), richTarget{f}, seeded()); err == nil {
		t.Errorf("a schedule of Faults and Parts ran")
	}
}
