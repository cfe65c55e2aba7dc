package history

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/target"
)

// A fault's structured record (links, components, parameters) survives the
// round trip, on closed, open and orphan-end intervals alike.
func TestNemesisStructuredFields(t *testing.T) {
	r := mustCreate(t)
	links := []target.Link{{From: "cp-1", To: "cp-0"}, {From: "cp-1", To: "cp-2", Port: "7001"}}
	r.Nemesis(NemesisEvent{ID: 1, Name: "api-store", Phase: PhaseStart, Targets: []string{"cp-1"}, Links: links,
		Params: map[string]string{"member": "1"}})
	r.Nemesis(NemesisEvent{ID: 1, Phase: PhaseEnd, Targets: []string{"cp-1"}, Links: links})
	r.Nemesis(NemesisEvent{ID: 2, Name: "pause-kubelet", Phase: PhaseStart, Components: []string{"kubelet/n1"},
		Params: map[string]string{"node": "n1"}})
	r.Nemesis(NemesisEvent{ID: 3, Name: "kill-member", Phase: PhaseEnd, Components: []string{"cp-2"}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h := mustLoad(t, r.Path())
	want := []Interval{
		{ID: 3, Name: "kill-member", Components: []string{"cp-2"}, Healed: true},
		{ID: 1, Name: "api-store", Targets: []string{"cp-1"}, Links: links, Params: map[string]string{"member": "1"}, Healed: true},
		{ID: 2, Name: "pause-kubelet", Components: []string{"kubelet/n1"}, Params: map[string]string{"node": "n1"}},
	}
	if diff := cmp.Diff(want, h.Nemesis, ignoreTimes); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}
}

// Histories written before the structured fields load as before: the
// intervals have none.
func TestNemesisOldFormat(t *testing.T) {
	old := `{"kind":"meta","t":0,"run_id":"r","seed":1,"scenario":"s","start":"2024-01-01T00:00:00Z","version":"v"}
{"kind":"nemesis","t":10,"id":1,"name":"partition-node","description":"cut node n1 from the control plane","phase":"start","targets":["n1","cp-0"],"wall":"2024-01-01T00:00:01Z"}
{"kind":"nemesis","t":20,"id":1,"description":"cut node n1 from the control plane","phase":"end","targets":["n1","cp-0"],"wall":"2024-01-01T00:00:02Z"}
`
	h, err := Read(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	want := []Interval{{ID: 1, Name: "partition-node", Description: "cut node n1 from the control plane",
		Targets: []string{"n1", "cp-0"}, Start: 10, End: 20, Healed: true}}
	if diff := cmp.Diff(want, h.Nemesis, cmp.FilterPath(func(p cmp.Path) bool {
		return strings.HasSuffix(p.String(), "Wall")
	}, cmp.Ignore())); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}
	if iv := h.Nemesis[0]; iv.Links != nil || iv.Components != nil || iv.Params != nil {
		t.Errorf("an old interval has structured fields: %+v", iv)
	}
}
