package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// fault appends a fault from start to end seconds (healed).
func (b *hb) fault(id uint64, name string, start, end float64) *hb {
	b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: id, Name: name, Start: secs(start), End: secs(end), Healed: true})
	return b
}

// replicas appends a store change of StatefulSet set (namespace default) at
// t with spec.replicas n.
func (b *hb) replicas(t float64, set string, n int) *hb {
	obj := fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"default"},"spec":{"replicas":%d}}`, set, n)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreModified, Resource: "statefulsets.apps", Namespace: "default", Name: set, RV: "1", Object: []byte(obj), T: secs(t)})
	return b
}

// until makes the history end at t seconds.
func (b *hb) until(t float64) *hb {
	b.h.End = max(b.h.End, secs(t))
	return b
}

func s(x float64) time.Duration { return time.Duration(secs(x)) }

// petFigures keeps the figures about one pet or fault, for comparison.
func figuresOf(figs []Figure, key string) []Figure {
	var out []Figure
	for _, f := range figs {
		if f.Key == key {
			out = append(out, f)
		}
	}
	return out
}

// A fault from 10 s to 20 s: web-0 is replaced on another node (time to
// recovery 5 s from the fault's start), web-1 never comes back, a
// ReplicaSet's pod and a pod an admin named like a pet are ignored.
func TestRecovery(t *testing.T) {
	h := (&hb{}).
		created(1, identityPet, "web-0", "a").
		created(1, identityPet, "web-1", "c").
		created(1, identityReplicaSet, "front-7f9c-x2x9z", "r").
		created(1, identityAdmin, "tool-0", "t").
		created(14, identityPet, "web-0", "b").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(2, history.LedgerStart, "n2", "web-1", "c").
		led(2, history.LedgerStart, "n1", "front-7f9c-x2x9z", "r").
		led(2, history.LedgerStart, "n1", "tool-0", "t").
		led(12, history.LedgerExit, "n1", "web-0", "a").
		led(12, history.LedgerExit, "n1", "front-7f9c-x2x9z", "r").
		led(12, history.LedgerExit, "n1", "tool-0", "t").
		led(13, history.LedgerExit, "n2", "web-1", "c").
		led(15, history.LedgerStart, "n2", "web-0", "b").
		fault(1, "partition-node", 10, 20).
		until(30).history()

	rep := Recovery(h)
	if rep.Scale != 1 {
		t.Errorf("scale %v, want 1", rep.Scale)
	}
	want := RecoveryReport{
		Scale: 1,
		Pets: []PetAvailability{{
			Pet: "default/web-0", FirstStart: secs(2), UIDs: 2,
			Wanted: s(28), WantedWall: s(28), Unavailable: s(3), UnavailableWall: s(3), Longest: s(3), LongestWall: s(3),
			Outages: []Outage{{Start: secs(12), End: secs(15), Ended: "a", EndedNode: "n1", How: EndRecovered, Next: "b", Node: "n2", NewUID: true}},
		}, {
			Pet: "default/web-1", FirstStart: secs(2), UIDs: 1,
			Wanted: s(28), WantedWall: s(28), Unavailable: s(17), UnavailableWall: s(17), Longest: s(17), LongestWall: s(17),
			Outages: []Outage{{Start: secs(13), End: secs(30), Ended: "c", EndedNode: "n2", How: EndHistory}},
		}},
		Faults: []FaultRecovery{{
			Fault: h.Nemesis[0],
			Pets: []PetRecovery{
				{Pet: "default/web-0", Down: secs(12), How: EndRecovered, TTR: s(5), TTRWall: s(5), Downtime: s(3), DowntimeWall: s(3), Next: "b", Node: "n2"},
				{Pet: "default/web-1", Down: secs(13), How: EndHistory, Downtime: s(17), DowntimeWall: s(17)},
			},
		}},
	}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Fatalf("report (-want +got):\n%s", diff)
	}
	if !rep.Faults[0].Pets[0].Recovered() || rep.Faults[0].Pets[1].Recovered() {
		t.Errorf("Recovered() wrong: %+v", rep.Faults[0].Pets)
	}

	figs := RecoveryFigures(rep)
	if diff := cmp.Diff([]Figure{
		{Name: "unavailable", Key: "default/web-0", Value: 3, Unit: "s"},
		{Name: "availability", Key: "default/web-0", Value: 100 * 25.0 / 28, Unit: "%"},
		{Name: "outages", Key: "default/web-0", Value: 1, Unit: "count"},
		{Name: "longest outage", Key: "default/web-0", Value: 3, Unit: "s"},
		{Name: "time to recovery", Key: "default/web-0", Value: 5, Unit: "s", Fault: "partition-node#1"},
		{Name: "downtime", Key: "default/web-0", Value: 3, Unit: "s", Fault: "partition-node#1"},
	}, figuresOf(figs, "default/web-0")); diff != "" {
		t.Errorf("web-0 figures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Figure{
		{Name: "unavailable", Key: "default/web-1", Value: 17, Unit: "s"},
		{Name: "availability", Key: "default/web-1", Value: 100 * 11.0 / 28, Unit: "%"},
		{Name: "outages", Key: "default/web-1", Value: 1, Unit: "count"},
		{Name: "longest outage", Key: "default/web-1", Value: 17, Unit: "s"},
		{Name: "down at the end", Key: "default/web-1", Value: 1, Unit: "count"},
		{Name: "not recovered", Key: "default/web-1", Value: 1, Unit: "count", Fault: "partition-node#1"},
	}, figuresOf(figs, "default/web-1")); diff != "" {
		t.Errorf("web-1 figures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Figure{{Name: "max time to recovery", Value: 5, Unit: "s", Fault: "partition-node#1"}}, figuresOf(figs, "")); diff != "" {
		t.Errorf("fault figures (-want +got):\n%s", diff)
	}
	for _, f := range figs {
		if f.Name == "time to recovery" && f.Key == "default/web-1" {
			t.Errorf("a pet that never recovered has a time to recovery: %+v", f)
		}
	}
}

// Outages outside faults, overlapping instances, a container restart of the
// same UID, a pet down before a fault (not the fault's doing), and the
// scaled clock.
func TestRecoveryOutages(t *testing.T) {
	fast := func(e *history.LedgerEntry) { e.Scaled = scaledBase.Add(50 * time.Duration(e.T)) }
	h := (&hb{}).
		created(1, identityPet, "web-0", "a").
		created(9, identityPet, "web-0", "b").
		led(2, history.LedgerStart, "n1", "web-0", "a", fast).
		led(4, history.LedgerExit, "n1", "web-0", "a", fast).
		led(5, history.LedgerStart, "n1", "web-0", "a", fast). // restart in place
		led(8, history.LedgerExit, "n1", "web-0", "a", fast).  // down before the fault
		led(11, history.LedgerStart, "n2", "web-0", "b", fast).
		led(40, history.LedgerStart, "n2", "web-0", "b", ctr("sidecar"), fast).
		led(41, history.LedgerExit, "n2", "web-0", "b", fast). // sidecar still runs
		fault(1, "kill", 10, 20).
		until(50).history()
	rep := Recovery(h)
	if rep.Scale != 50 {
		t.Fatalf("scale %v, want 50", rep.Scale)
	}
	if len(rep.Pets) != 1 {
		t.Fatalf("pets %+v", rep.Pets)
	}
	p := rep.Pets[0]
	wantOutages := []Outage{
		{Start: secs(4), End: secs(5), Ended: "a", EndedNode: "n1", How: EndRecovered, Next: "a", Node: "n1"},
		{Start: secs(8), End: secs(11), Ended: "a", EndedNode: "n1", How: EndRecovered, Next: "b", Node: "n2", NewUID: true},
	}
	if diff := cmp.Diff(wantOutages, p.Outages); diff != "" {
		t.Errorf("outages (-want +got):\n%s", diff)
	}
	if p.UnavailableWall != s(4) || p.Unavailable != s(200) || p.Longest != s(150) {
		t.Errorf("unavailable %v (wall %v), longest %v; want 200s (4s), 150s", p.Unavailable, p.UnavailableWall, p.Longest)
	}
	if len(rep.Faults) != 1 || len(rep.Faults[0].Pets) != 0 {
		t.Errorf("the fault is blamed for an outage that began before it: %+v", rep.Faults)
	}
}

// A pet its set no longer wants is not down; one wanted again is down
// until it starts.
func TestRecoveryScaledDown(t *testing.T) {
	h := (&hb{}).
		replicas(0.5, "web", 2).
		created(1, identityPet, "web-0", "a").
		created(1, identityPet, "web-1", "c").
		created(25, identityPet, "web-1", "d").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(2, history.LedgerStart, "n2", "web-1", "c").
		replicas(11, "web", 1).
		led(13, history.LedgerExit, "n2", "web-1", "c"). // scaled down during the fault
		replicas(15, "web", 0).
		led(16, history.LedgerExit, "n1", "web-0", "a"). // too
		replicas(22, "web", 2).
		led(27, history.LedgerStart, "n1", "web-1", "d").
		fault(1, "partition-node", 10, 20).
		until(30).history()
	rep := Recovery(h)
	byPet := map[string]PetAvailability{}
	for _, p := range rep.Pets {
		byPet[p.Pet] = p
	}
	// web-0: wanted 2..15 and 22..30 = 21 s; down 22..30 (never restarted).
	w0 := byPet["default/web-0"]
	if diff := cmp.Diff([]Outage{{Start: secs(22), End: secs(30), How: EndHistory}}, w0.Outages); diff != "" {
		t.Errorf("web-0 outages (-want +got):\n%s", diff)
	}
	if w0.WantedWall != s(21) {
		t.Errorf("web-0 wanted %v, want 21s", w0.WantedWall)
	}
	// web-1: wanted 2..11 and 22..30; down 22..27.
	w1 := byPet["default/web-1"]
	if diff := cmp.Diff([]Outage{{Start: secs(22), End: secs(27), How: EndRecovered, Next: "d", Node: "n1", NewUID: true}}, w1.Outages); diff != "" {
		t.Errorf("web-1 outages (-want +got):\n%s", diff)
	}
	if len(rep.Faults[0].Pets) != 0 {
		t.Errorf("scaled-down pets counted as fault casualties: %+v", rep.Faults[0].Pets)
	}

	// Scaled down while down: the outage ends there, not recovered but
	// not a failure either.
	h = (&hb{}).
		replicas(0.5, "web", 1).
		created(1, identityPet, "web-0", "a").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(12, history.LedgerExit, "n1", "web-0", "a").
		replicas(14, "web", 0).
		fault(1, "partition-node", 10, 20).
		until(30).history()
	rep = Recovery(h)
	if diff := cmp.Diff([]Outage{{Start: secs(12), End: secs(14), Ended: "a", EndedNode: "n1", How: EndScaledDown}}, rep.Pets[0].Outages); diff != "" {
		t.Errorf("outages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]PetRecovery{{Pet: "default/web-0", Down: secs(12), How: EndScaledDown, Downtime: s(2), DowntimeWall: s(2)}}, rep.Faults[0].Pets); diff != "" {
		t.Errorf("fault (-want +got):\n%s", diff)
	}
	for _, f := range RecoveryFigures(rep) {
		if f.Fault != "" {
			t.Errorf("figure for a pet scaled down: %+v", f)
		}
	}
}

// A pet still running on a node the store records fenced is down from the
// fence on (PS-14), as at-most-one counts it.
func TestRecoveryFenced(t *testing.T) {
	h := (&hb{}).
		created(1, identityPet, "web-0", "a").
		created(16, identityPet, "web-0", "b").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		nodeStatus(14, "n1", true).
		led(18, history.LedgerStart, "n2", "web-0", "b").
		led(25, history.LedgerExit, "n1", "web-0", "a").
		fault(1, "partition-node", 10, 30).
		until(35).history()
	rep := Recovery(h)
	want := []Outage{{Start: secs(14), End: secs(18), Ended: "a", EndedNode: "n1", Fenced: true, How: EndRecovered, Next: "b", Node: "n2", NewUID: true}}
	if diff := cmp.Diff(want, rep.Pets[0].Outages); diff != "" {
		t.Errorf("outages (-want +got):\n%s", diff)
	}
	if got := rep.Faults[0].Pets; len(got) != 1 || got[0].TTR != s(8) || got[0].Downtime != s(4) {
		t.Errorf("fault recovery %+v, want TTR 8s, downtime 4s", got)
	}
}

func TestRecoveryEmpty(t *testing.T) {
	rep := Recovery(&history.History{})
	if len(rep.Pets) != 0 || len(rep.Faults) != 0 || len(RecoveryFigures(rep)) != 0 {
		t.Errorf("empty history: %+v", rep)
	}
}
