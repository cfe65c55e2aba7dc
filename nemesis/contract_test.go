package nemesis_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/target"
)

// everyFaultTarget is a fake target on which every fault is available: five
// members and a fencing controller besides what kubeLike has.
func everyFaultTarget() richTarget {
	f := kubeLike(everything())
	f.members = 5
	for i := 3; i < 5; i++ {
		f.comps = append(f.comps, target.Component{Name: fmt.Sprintf("etcd-%d", i), Role: target.RoleStore, Host: fmt.Sprintf("etcd-%d", i), Member: i})
	}
	f.comps = append(f.comps, target.Component{Name: "fencing", Role: target.RoleFencing, Host: "kcm", Member: -1})
	return richTarget{f}
}

// TestFaultRecordContract: what the nemesis writes of each fault is what
// the checkers read, in the history's terms. Every fault, injected by a
// schedule, records an effect of history.Effects, the same FaultEffect
// answers for a history of before (so a saved run is judged alike),
// parameters under history's Param keys only, and the nodes of the
// kubelets it acted on, which FaultNodes answers.
func TestFaultRecordContract(t *testing.T) {
	for _, f := range nemesis.All() {
		t.Run(f.Name(), func(t *testing.T) {
			tgt := everyFaultTarget()
			if !f.Available(tgt) {
				t.Fatalf("%s is not available on the fake target", f.Name())
			}
			s := &nemesis.Schedule{Faults: []nemesis.Fault{f}, Interval: 2 * time.Millisecond}
			h := runRecorded(t, s, tgt, seeded(), 1)
			for _, iv := range h.Nemesis {
				checkRecord(t, tgt, f, iv)
			}
		})
	}
}

func checkRecord(t *testing.T, tgt target.Target, f nemesis.Fault, iv history.Interval) {
	t.Helper()
	if iv.Name != f.Name() || !iv.Healed {
		t.Errorf("interval %q (healed %v) of fault %s", iv.Name, iv.Healed, f.Name())
	}
	e := iv.Effect
	if !slices.Contains(history.Effects, e) || e != nemesis.EffectOf(f) || iv.FaultEffect() != e {
		t.Errorf("%s records effect %q (EffectOf %q); want one of %v", f.Name(), e, nemesis.EffectOf(f), history.Effects)
	}
	if old := history.LegacyEffect(f.Name()); old != "" && old != e {
		t.Errorf("%s records effect %q, but a history of before is read as %q", f.Name(), e, old)
	}
	for k := range iv.Params {
		if !slices.Contains(history.ParamKeys, k) {
			t.Errorf("%s records parameter %q, not one of history.ParamKeys", f.Name(), k)
		}
	}
	if e == history.EffectCut && len(iv.Links) == 0 {
		t.Errorf("%s cut no link it records", f.Name())
	}
	var want []string
	for _, c := range tgt.Components() {
		if c.Node != "" && slices.Contains(iv.Components, c.Name) && !slices.Contains(want, c.Node) {
			want = append(want, c.Node)
		}
	}
	for _, n := range want {
		if !slices.Contains(iv.FaultNodes(), n) {
			t.Errorf("%s acted on node %s's kubelet, but records nodes %v", f.Name(), n, iv.FaultNodes())
		}
	}
	if n := iv.Params[history.ParamNode]; n != "" && !slices.Contains(iv.FaultNodes(), n) {
		t.Errorf("%s drew node %s, but records nodes %v", f.Name(), n, iv.FaultNodes())
	}
}
