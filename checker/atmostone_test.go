package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// A pet's first UID still runs on its (partitioned) node when a wrongly
// force-deleted replacement starts elsewhere.
func TestAtMostOnePetOverlap(t *testing.T) {
	b := &hb{}
	b.created(1, identityPet, "web-0", "a").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		call(10, "node-controller", "delete", "pods", "default", "web-0", uid("a"), askGrace(0)).
		created(11, identityPet, "web-0", "b").
		led(12, history.LedgerStart, "n2", "web-0", "b").
		led(20, history.LedgerExit, "n1", "web-0", "a")
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "default/web-0" {
		t.Errorf("evidence key %q", ev.Key)
	}
	if diff := cmp.Diff([]string{"a:start", "b:start", "a:exit"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	if len(ev.API) != 3 {
		t.Errorf("evidence calls %+v, want both creates and the force deletion", ev.API)
	}
	mustMention(t, "description", ev.Description, "UID a", "UID b", "n1", "n2", "ledger #1", "ledger #2")
	mustMention(t, "summary", res.Summary, "default/web-0", "PS-11")
	if res.Stats.Keys != 1 || res.Stats.Ops != 2 {
		t.Errorf("stats %+v", res.Stats)
	}
}

func TestAtMostOneOk(t *testing.T) {
	tests := []struct {
		name string
		b    *hb
	}{
		{"replacement after the exit", (&hb{}).
			created(1, identityPet, "web-0", "a").
			led(2, history.LedgerStart, "n1", "web-0", "a").
			led(3, history.LedgerTerm, "n1", "web-0", "a").
			led(4, history.LedgerExit, "n1", "web-0", "a").
			created(5, identityPet, "web-0", "b").
			led(6, history.LedgerStart, "n2", "web-0", "b")},
		// A power fence ends the run at once; the exit the runtime records
		// after it does not matter.
		{"replacement after a power-off", (&hb{}).
			created(1, identityPet, "web-0", "a").
			led(2, history.LedgerStart, "n1", "web-0", "a").
			led(3, history.LedgerPowerOff, "n1", "web-0", "a").
			created(3.5, identityPet, "web-0", "b").
			led(4, history.LedgerStart, "n2", "web-0", "b").
			led(5, history.LedgerExit, "n1", "web-0", "a")},
		{"one UID: restarts and several containers", (&hb{}).
			created(1, identityPet, "web-0", "a").
			led(2, history.LedgerStart, "n1", "web-0", "a").
			led(3, history.LedgerStart, "n1", "web-0", "a", ctr("side")).
			led(4, history.LedgerExit, "n1", "web-0", "a").
			led(5, history.LedgerStart, "n1", "web-0", "a")},
		{"two pets of one set", (&hb{}).
			created(1, identityPet, "web-0", "a").
			created(1, identityPet, "web-1", "b").
			led(2, history.LedgerStart, "n1", "web-0", "a").
			led(2, history.LedgerStart, "n1", "web-1", "b")},
		// A pod that is no pet may reuse a force-deleted pod's name (LC-13).
		{"name reused by a pod that is no pet", (&hb{}).
			created(1, "workload", "db-0", "a").
			led(2, history.LedgerStart, "n1", "db-0", "a").
			created(3, "workload", "db-0", "b").
			led(4, history.LedgerStart, "n2", "db-0", "b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustVerdict(t, CheckAtMostOne(bg, tt.b.history(), Options{}), Ok)
			if len(res.Evidence) != 0 {
				t.Errorf("evidence on Ok: %+v", res.Evidence)
			}
		})
	}
}

// A history cut short: a UID with no exit runs until the end, so a
// replacement that started meanwhile overlaps it.
func TestAtMostOneTruncated(t *testing.T) {
	b := &hb{}
	b.created(1, identityPet, "web-0", "a").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		created(3, identityPet, "web-0", "b").
		led(4, history.LedgerStart, "n2", "web-0", "b")
	b.h.Truncated = true
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "still running at the end of the history")
}

// A pet is recognized by the name its create asked for even when the
// create's outcome, and so its UID, is unknown.
func TestAtMostOnePetByName(t *testing.T) {
	b := &hb{}
	b.call(1, identityPet, "create", "pods", "default", "web-1", outcome(history.StatusUnknown)).
		led(2, history.LedgerStart, "n1", "web-1", "a").
		call(3, identityPet, "create", "pods", "default", "web-1", outcome(history.StatusUnknown)).
		led(4, history.LedgerStart, "n2", "web-1", "b")
	mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Illegal)

	// A name like a pet's that the pet controller never created is no pet.
	b = &hb{}
	b.created(0.5, identityPet, "web-0", "x").
		led(2, history.LedgerStart, "n1", "app-1", "a").
		led(4, history.LedgerStart, "n2", "app-1", "b")
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 non-pet pod name ran two UIDs at once")
}

// Without any pet-controller create in the history, a pet-like name
// running twice cannot be judged.
func TestAtMostOneUndecided(t *testing.T) {
	b := &hb{}
	b.led(2, history.LedgerStart, "n1", "web-0", "a").
		led(4, history.LedgerStart, "n2", "web-0", "b")
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "no pet-controller create")

	// Without overlaps there is nothing to decide, pets or not.
	b = &hb{}
	b.led(2, history.LedgerStart, "n1", "web-0", "a").
		led(3, history.LedgerExit, "n1", "web-0", "a").
		led(4, history.LedgerStart, "n2", "web-0", "b")
	res = mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "no pod name ran two UIDs at once", "no pod is known to be a pet")
}

// A ReplicaSet replacement overlapping its terminating predecessor is
// expected (PS-7): Ok, reported in the summary and as expected evidence.
func TestAtMostOneReplicaSetOverlapExpected(t *testing.T) {
	b := &hb{}
	b.created(1, identityReplicaSet, "front-x7k2p", "r1").
		led(2, history.LedgerStart, "n1", "front-x7k2p", "r1").
		call(5, "workload", "delete", "pods", "default", "front-x7k2p", uid("r1"), askGrace(30)).
		created(6, identityReplicaSet, "front-q9w4z", "r2").
		led(7, history.LedgerStart, "n2", "front-q9w4z", "r2").
		led(8, history.LedgerTerm, "n1", "front-x7k2p", "r1", grace(30)).
		led(9, history.LedgerExit, "n1", "front-x7k2p", "r1").
		// A replica of another set, and one started after r1 ended: neither
		// is a replacement overlap.
		created(10, identityReplicaSet, "back-aaaaa", "r3").
		led(11, history.LedgerStart, "n1", "back-aaaaa", "r3").
		created(12, identityReplicaSet, "front-zzzzz", "r4").
		led(13, history.LedgerStart, "n1", "front-zzzzz", "r4")
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 ReplicaSet replacement", "PS-7")
	if len(res.Evidence) != 1 || !res.Evidence[0].Expected {
		t.Fatalf("evidence %+v, want one expected overlap", res.Evidence)
	}
	ev := res.Evidence[0]
	if ev.Key != "default/front" || len(ev.API) != 1 || ev.API[0].UID != "r1" {
		t.Errorf("expected-overlap evidence %+v", ev)
	}
	if diff := cmp.Diff([]string{"r2:start"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
}

func TestAtMostOneUIDOnTwoNodes(t *testing.T) {
	b := &hb{}
	b.created(1, identityPet, "web-0", "a").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(3, history.LedgerExit, "n1", "web-0", "a").
		led(4, history.LedgerStart, "n2", "web-0", "a")
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "a" {
		t.Errorf("evidence key %q, want the UID", ev.Key)
	}
	if diff := cmp.Diff([]string{"a:start", "a:start"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	mustMention(t, "summary", res.Summary, "LC-3")
}

func TestAtMostOneEmpty(t *testing.T) {
	mustVerdict(t, CheckAtMostOne(bg, &history.History{}, Options{}), Unknown)
	// Storage writes alone are no container runs.
	b := (&hb{}).led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v", 1))
	mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Unknown)
}

func TestAtMostOneCancelled(t *testing.T) {
	b := &hb{}
	for i := range 10000 {
		name := fmt.Sprintf("web-%d", i)
		b.created(float64(i), identityPet, name, name).led(float64(i), history.LedgerStart, "n1", name, name)
	}
	ctx, cancel := contextWithCancel()
	cancel()
	mustVerdict(t, CheckAtMostOne(ctx, b.history(), Options{}), Unknown)
}

// A long run stays fast: 200,000 ledger entries over 1,000 pets, each
// replaced 50 times, in O(n log n).
func TestAtMostOneLarge(t *testing.T) {
	b := &hb{}
	t0 := 0.0
	for r := range 50 {
		for p := range 1000 {
			name, u := fmt.Sprintf("web-%d", p), fmt.Sprintf("u-%d-%d", p, r)
			b.created(t0, identityPet, name, u).
				led(t0, history.LedgerStart, "n1", name, u).
				led(t0, history.LedgerStart, "n1", name, u, ctr("side")).
				led(t0, history.LedgerExit, "n1", name, u).
				led(t0, history.LedgerExit, "n1", name, u, ctr("side"))
			t0 += 0.001
		}
	}
	start := time.Now()
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Ok)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	if res.Stats.Keys != 1000 || res.Stats.Checked != 100000 {
		t.Errorf("stats %+v", res.Stats)
	}
}

// nodeStatus appends a store change of node at t with its Fenced condition
// True or False.
func (b *hb) nodeStatus(t float64, node string, fenced bool) *hb {
	status := "False"
	if fenced {
		status = "True"
	}
	obj := fmt.Sprintf(`{"metadata":{"name":%q},"status":{"conditions":[{"type":"Ready","status":"Unknown"},{"type":"podsafe.io/Fenced","status":%q}]}}`, node, status)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreModified, Resource: "nodes", Name: node, RV: "1", Object: []byte(obj), T: secs(t)})
	return b
}

// A pet still running on a node whose fence the store recorded (a storage
// or network fence leaves its processes up) is cut off: the replacement may
// start (PS-14). The same replacement before the fence is recorded, or on
// a node whose fence was lifted, is a violation.
func TestAtMostOneFencedNode(t *testing.T) {
	base := func() *hb {
		return (&hb{}).
			created(1, identityPet, "web-0", "a").
			led(2, history.LedgerStart, "n1", "web-0", "a")
	}
	ok := base().
		nodeStatus(5, "n1", true).
		created(6, identityPet, "web-0", "b").
		led(7, history.LedgerStart, "n2", "web-0", "b").
		led(30, history.LedgerKill, "n1", "web-0", "a")
	res := mustVerdict(t, CheckAtMostOne(bg, ok.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "fence", "PS-14")
	if len(res.Evidence) != 1 || !res.Evidence[0].Expected {
		t.Errorf("evidence %+v, want one expected item for the fenced run", res.Evidence)
	}

	early := base().
		created(6, identityPet, "web-0", "b").
		led(7, history.LedgerStart, "n2", "web-0", "b").
		nodeStatus(8, "n1", true)
	mustVerdict(t, CheckAtMostOne(bg, early.history(), Options{}), Illegal)

	// Fenced before the first UID started (an earlier fence, later lifted
	// by an admin): it does not cut the new run.
	lifted := (&hb{}).
		nodeStatus(0.5, "n1", true).
		nodeStatus(0.8, "n1", false).
		created(1, identityPet, "web-0", "a").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		created(6, identityPet, "web-0", "b").
		led(7, history.LedgerStart, "n2", "web-0", "b")
	mustVerdict(t, CheckAtMostOne(bg, lifted.history(), Options{}), Illegal)

	other := base().
		nodeStatus(5, "n3", true).
		created(6, identityPet, "web-0", "b").
		led(7, history.LedgerStart, "n2", "web-0", "b")
	mustVerdict(t, CheckAtMostOne(bg, other.history(), Options{}), Illegal)
}

// storePod records the store's ADDED event of pod name with UID u owned
// by a controller of kind (none when kind is "").
func (b *hb) storePod(t float64, name, u, kind string) *hb {
	owners := ""
	if kind != "" {
		owners = fmt.Sprintf(`,"ownerReferences":[{"apiVersion":"apps/v1","kind":%q,"name":"web","uid":"s","controller":true}]`, kind)
	}
	obj := fmt.Sprintf(`{"metadata":{"namespace":"default","name":%q,"uid":%q%s}}`, name, u, owners)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreAdded, Resource: "pods", Namespace: "default", Name: name,
		RV: fmt.Sprint(len(b.h.Store) + 1), Object: []byte(obj), T: secs(t)})
	return b
}

// On an existing cluster the controllers' creates are not recorded: the
// store's record of a pod owned by a StatefulSet makes it a pet, so two of
// its UIDs running at once are Illegal, not Unknown.
func TestAtMostOnePetsFromStoreOwners(t *testing.T) {
	b := &hb{}
	b.storePod(1, "web-0", "a", "StatefulSet").storePod(3, "web-0", "b", "StatefulSet").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(4, history.LedgerStart, "n2", "web-0", "b")
	res := mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Illegal)
	mustMention(t, "summary", res.Summary, "1 pet ran two UIDs at once (PS-11)")

	// One after the other: Ok, judged as a pet.
	b = &hb{}
	b.storePod(1, "web-0", "a", "StatefulSet").storePod(3, "web-0", "b", "StatefulSet").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(2.5, history.LedgerExit, "n1", "web-0", "a").
		led(4, history.LedgerStart, "n2", "web-0", "b")
	res = mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "no pet ran two UIDs at once (1 pet")

	// Owned by a ReplicaSet, a pet-like name is no pet: its overlap with a
	// pod the history says nothing of is allowed (LC-13).
	b = &hb{}
	b.storePod(0.5, "db-0", "x", "StatefulSet").
		storePod(1, "web-0", "a", "ReplicaSet").storePod(3, "web-0", "b", "").
		led(2, history.LedgerStart, "n1", "web-0", "a").
		led(4, history.LedgerStart, "n2", "web-0", "b")
	res = mustVerdict(t, CheckAtMostOne(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "non-pet pod name ran two UIDs at once")
}
