package history

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A fault's effect and nodes survive the round trip and are what
// FaultEffect and FaultNodes answer.
func TestFaultEffectRoundTrip(t *testing.T) {
	r := mustCreate(t)
	r.Nemesis(NemesisEvent{ID: 1, Name: "some-new-fault", Phase: PhaseStart, Effect: EffectPause,
		Components: []string{"kubelet/n1"}, Nodes: []string{"n1"}, Params: map[string]string{ParamNode: "n1"}})
	r.Nemesis(NemesisEvent{ID: 1, Phase: PhaseEnd})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h := mustLoad(t, r.Path())
	if len(h.Nemesis) != 1 {
		t.Fatalf("intervals %+v", h.Nemesis)
	}
	iv := h.Nemesis[0]
	if iv.FaultEffect() != EffectPause || !slices.Equal(iv.FaultNodes(), []string{"n1"}) || !iv.Healed {
		t.Errorf("interval %+v: effect %q, nodes %v", iv, iv.FaultEffect(), iv.FaultNodes())
	}
	b, err := Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h.Nemesis, again.Nemesis, ignoreTimes); diff != "" {
		t.Errorf("re-encoded intervals (-want +got):\n%s", diff)
	}
}

// An interval of a history written before effects and nodes were recorded
// answers from its name, its node parameter and its kubelet targets.
func TestFaultEffectLegacy(t *testing.T) {
	for _, tc := range []struct {
		iv     Interval
		effect FaultEffect
		nodes  []string
	}{
		{Interval{Name: "clock-jump", Targets: []string{"kubelet/n1"}}, EffectClock, []string{"n1"}},
		{Interval{Name: "lose-node", Targets: []string{"n2"}, Params: map[string]string{"node": "n2"}}, EffectPowerOff, []string{"n2"}},
		{Interval{Name: "partition-node", Targets: []string{"n1", "cp-0"}, Params: map[string]string{"node": "n1"}}, EffectCut, []string{"n1"}},
		{Interval{Name: "kill-member", Components: []string{"cp-2"}}, EffectKill, nil},
		{Interval{Name: "freeze-watch", Components: []string{"kube-controller-manager-0"}}, EffectFreezeWatch, nil},
		{Interval{Name: "unheard-of"}, "", nil},
		// A recorded effect wins over the name.
		{Interval{Name: "clock-jump", Effect: EffectPause, Nodes: []string{"n3"}, Targets: []string{"kubelet/n1"}}, EffectPause, []string{"n3"}},
	} {
		if got := tc.iv.FaultEffect(); got != tc.effect {
			t.Errorf("%s: effect %q, want %q", tc.iv.Name, got, tc.effect)
		}
		if diff := cmp.Diff(tc.nodes, tc.iv.FaultNodes()); diff != "" {
			t.Errorf("%s: nodes (-want +got):\n%s", tc.iv.Name, diff)
		}
	}
	for name, e := range legacyEffects {
		if !slices.Contains(Effects, e) {
			t.Errorf("legacy fault %s has effect %q, not one of Effects", name, e)
		}
	}
}

func TestFaultParamString(t *testing.T) {
	iv := Interval{Params: map[string]string{ParamOffset: "-3s", ParamMember: "1"}}
	if got, want := iv.ParamString(), "member=1 offset=-3s"; got != want {
		t.Errorf("ParamString = %q, want %q", got, want)
	}
	if got := (&Interval{}).ParamString(); got != "" {
		t.Errorf("ParamString of none = %q", got)
	}
}
