package nemesis_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/target"
)

// TestFakeProcesses: crashes, pauses, clocks, slow members, power and
// failpoints ask the target for exactly the components expected, and heal
// exactly those.
func TestFakeProcesses(t *testing.T) {
	f := kubeLike(everything())
	tgt := richTarget{f}
	rng := seeded()
	for _, tc := range []struct {
		fault      string
		components []string // candidates; the injection must act on one
		inject     string   // the call, with %s for the component
		heal       string
	}{
		{"kill-member", []string{"etcd-0", "etcd-1", "etcd-2"}, "kill %s", "restart %s"},
		{"kill-leader", []string{"etcd-1"}, "kill %s", "restart %s"},
		{"kill-kubelet", []string{"kubelet/n0", "kubelet/n1"}, "kill %s", "restart %s"},
		{"kill-scheduler", []string{"kube-scheduler"}, "kill %s", "restart %s"},
		{"kill-controller", []string{"kube-controller-manager"}, "kill %s", "restart %s"},
		{"kill-controllers", []string{"kube-controller-manager"}, "kill %s", "restart %s"},
		{"pause-kubelet", []string{"kubelet/n0", "kubelet/n1"}, "pause %s", "resume %s"},
		{"pause-controller", []string{"kube-controller-manager"}, "pause %s", "resume %s"},
		{"pause-scheduler", []string{"kube-scheduler"}, "pause %s", "resume %s"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			inj, calls := fakeInject(t, tgt, f, tc.fault, rng)
			if len(inj.Components) != 1 || !slices.Contains(tc.components, inj.Components[0]) {
				t.Fatalf("%s acted on %v, want one of %v", tc.fault, inj.Components, tc.components)
			}
			c := inj.Components[0]
			if diff := cmp.Diff([]string{fmt.Sprintf(tc.inject, c)}, calls); diff != "" {
				t.Errorf("inject calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{fmt.Sprintf(tc.heal, c)}, fakeHeal(t, f, inj)); diff != "" {
				t.Errorf("heal calls (-want +got):\n%s", diff)
			}
			// A second heal finds the component as wanted: no error.
			if err := inj.Heal(); err != nil {
				t.Errorf("second heal: %v", err)
			}
		})
	}

	t.Run("clock", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "clock-skew", rng)
		d, err := time.ParseDuration(inj.Params["offset"])
		if err != nil || abs(d) < time.Second || abs(d) >= time.Minute {
			t.Errorf("offset %q, want 1s to 1m either way", inj.Params["offset"])
		}
		c := inj.Components[0]
		if !tgt.Can(target.Clock, c) || !slices.Equal(calls, []string{fmt.Sprintf("clock %s %s", c, d)}) {
			t.Errorf("clock-skew of %s by %s called %v", c, d, calls)
		}
		if diff := cmp.Diff([]string{"reset clock " + c}, fakeHeal(t, f, inj)); diff != "" {
			t.Errorf("heal calls (-want +got):\n%s", diff)
		}
		inj, _ = fakeInject(t, tgt, f, "clock-strobe", rng)
		fakeHeal(t, f, inj)
		if off, _ := tgt.ClockOffset(inj.Components[0]); off != 0 {
			t.Errorf("offset %s after the strobe's heal", off)
		}
	})

	t.Run("slow", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "slow-leader", rng)
		d, _ := time.ParseDuration(inj.Params["delay"])
		if inj.Params["member"] != "1" || d < 5*time.Millisecond || d > 25*time.Millisecond ||
			!slices.Equal(calls, []string{fmt.Sprintf("slow 1 %s", d)}) || !slices.Equal(inj.Components, []string{"etcd-1"}) {
			t.Errorf("slow-leader: params %v, components %v, calls %v", inj.Params, inj.Components, calls)
		}
		if diff := cmp.Diff([]string{"unslow 1"}, fakeHeal(t, f, inj)); diff != "" {
			t.Errorf("heal calls (-want +got):\n%s", diff)
		}
	})

	t.Run("lose-node", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "lose-node", rng)
		n := inj.Params["node"]
		if diff := cmp.Diff([]string{"power off " + n, "delete node " + n}, calls); diff != "" {
			t.Errorf("inject calls (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"power on " + n}, fakeHeal(t, f, inj)); diff != "" {
			t.Errorf("heal calls (-want +got):\n%s", diff)
		}
	})

	t.Run("failpoint", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "failpoint", rng)
		want := fmt.Sprintf("failpoint %s=%s", inj.Params["failpoint"], inj.Params["term"])
		if !slices.ContainsFunc(nemesis.Failpoints, func(fp nemesis.Failpoint) bool { return fp.Name == inj.Params["failpoint"] }) ||
			!slices.Equal(calls, []string{want}) {
			t.Errorf("failpoint: params %v, calls %v", inj.Params, calls)
		}
		fakeHeal(t, f, inj)
	})

	if f.cutNow() != nil || len(f.down) != 0 || len(f.paused) != 0 || len(f.offsets) != 0 || len(f.off) != 0 {
		t.Errorf("left behind: cut %v, down %v, paused %v, clocks %v, off %v", f.cutNow(), f.down, f.paused, f.offsets, f.off)
	}
}
