package checker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// runningPod is web-0 (UID a) running on n1 from 1 s to 50 s.
func runningPod() *hb {
	b := &hb{}
	return b.created(0.5, identityPet, "web-0", "a").led(1, start, "n1", "web-0", "a")
}

func endPod(b *hb) *hb { return b.led(50, exit, "n1", "web-0", "a") }

// force records a force deletion of web-0 (UID a) by identity.
func (b *hb) force(t float64, identity string, mods ...func(*history.APICall)) *hb {
	return b.call(t, identity, "delete", "pods", "default", "web-0", append([]func(*history.APICall){uid("a"), askGrace(0)}, mods...)...)
}

// The node controller force deletes a pet whose partitioned node still
// runs it.
func TestAuthorityControllerForceDelete(t *testing.T) {
	b := endPod(runningPod().force(10, "node-controller"))
	res := mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "default/web-0" || len(ev.API) != 1 || ev.API[0].Identity != "node-controller" {
		t.Errorf("evidence %+v, want the node controller's deletion", ev)
	}
	if diff := cmp.Diff([]string{"a:start", "a:exit"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	mustMention(t, "description", ev.Description, "PS-9", "node-controller delete pods default/web-0 grace 0", "node n1", "ledger #0")
}

func TestAuthority(t *testing.T) {
	tests := []struct {
		name    string
		b       *hb
		want    Verdict
		mention string
	}{
		{"admin", endPod(runningPod().force(10, identityAdmin)), Ok, "1 by admin"},
		{"kubelet finishing the deletion", runningPod().
			deleted(5, "workload", "a", 30).
			led(6, term, "n1", "web-0", "a", grace(30)).
			led(7, exit, "n1", "web-0", "a").
			force(8, "kubelet:n1"), Ok, "1 by kubelets finishing"},
		{"kubelet deleting before its containers ended", endPod(runningPod().force(10, "kubelet:n1")), Illegal, "PS-8"},
		{"kubelet of another node", endPod(runningPod().force(10, "kubelet:n2")), Illegal, "only kubelet:n1"},
		{"pod GC after the node's deletion", endPod(runningPod().
			call(8, identityAdmin, "delete", "nodes", "", "n1").
			force(10, identityPodGC)), Ok, "pod GC after the node's deletion"},
		// A node deletion whose outcome is unknown may have happened.
		{"pod GC after a node deletion of unknown outcome", endPod(runningPod().
			call(8, identityAdmin, "delete", "nodes", "", "n1", outcome(history.StatusUnknown)).
			force(10, identityPodGC)), Ok, "pod GC"},
		{"pod GC with the node in place", endPod(runningPod().force(10, identityPodGC)), Illegal, "PS-10"},
		{"pod GC after a deletion by someone else", endPod(runningPod().
			call(8, "node-controller", "delete", "nodes", "", "n1").
			force(10, identityPodGC)), Illegal, "PS-10"},
		{"pod GC after the node registered again", endPod(runningPod().
			call(8, identityAdmin, "delete", "nodes", "", "n1").
			call(9, "kubelet:n1", "create", "nodes", "", "n1").
			force(10, identityPodGC)), Illegal, "registered again"},
		{"fencing after the fence", endPod(runningPod().
			call(8, identityFencing, "update", "nodes", "", "n1", sub("status")).
			force(10, identityFencing)), Ok, "the fencing controller after a fence"},
		{"fencing before the fence", endPod(runningPod().
			call(8, identityFencing, "update", "nodes", "", "n1").
			force(10, identityFencing).
			call(11, identityFencing, "update", "nodes", "", "n1", sub("status"))), Illegal, "PS-14"},
		{"fencing a node it fenced by power", runningPod().
			led(8, history.LedgerPowerOff, "n1", "web-0", "a").
			force(10, identityFencing), Ok, "no container running"},
		{"eviction with grace 0", endPod(runningPod().
			call(10, "disruption-controller", "create", "pods", "default", "web-0", sub("eviction"), askGrace(0))), Illegal, "PS-9"},
		// The answer was not read: the pod is known by its name only.
		{"no UID in the answer", endPod(runningPod().
			call(10, "replicaset-controller", "delete", "pods", "default", "web-0", askGrace(0))), Illegal, "PS-9"},
		{"unknown outcome", endPod(runningPod().force(10, "node-controller", outcome(history.StatusUnknown))), Ok, "1 grace-0 deletion of unknown outcome"},
		{"refused", endPod(runningPod().force(10, "node-controller", code(403), outcome(history.StatusFail))), Ok, "none asking for grace 0"},
		{"graceful", endPod(runningPod().deleted(10, "node-controller", "a", 30)), Ok, "none asking for grace 0"},
		// Unbound or finished pods: grace 0 is no force deletion (GP-6).
		{"pod that never ran", (&hb{}).
			created(0.5, identityPet, "web-0", "a").
			force(10, "pet-controller").
			led(20, start, "n1", "web-1", "b"), Ok, "no container running"},
		{"the deletion overlapping the exit", runningPod().
			call(10, "pet-controller", "delete", "pods", "default", "web-0", uid("a"), askGrace(0), func(c *history.APICall) { c.Return = secs(12) }).
			led(11, exit, "n1", "web-0", "a"), Ok, "no container running"},
		{"collection", endPod(runningPod().call(10, "namespace-controller", "deletecollection", "pods", "default", "", askGrace(0))), Ok, "1 deletecollection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustResult(t, CheckAuthority(bg, tt.b.history(), Options{}), tt.want, tt.mention)
		})
	}
}

// Without a ledger the history cannot show whether a controller's grace-0
// deletion removed a running pod; a kubelet's is taken as finishing one.
func TestAuthorityWithoutLedger(t *testing.T) {
	b := (&hb{}).force(10, "node-controller")
	res := mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Unknown)
	if len(res.Evidence) != 1 || len(res.Evidence[0].API) != 1 {
		t.Errorf("evidence %+v, want the undecided call", res.Evidence)
	}
	b = (&hb{}).force(10, "kubelet:n1").force(11, identityAdmin)
	mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Ok)
}

func TestAuthorityEmpty(t *testing.T) {
	mustVerdict(t, CheckAuthority(bg, &history.History{}, Options{}), Unknown)
	b := (&hb{}).call(1, "workload", "get", "pods", "default", "web-0")
	mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Unknown)
}

// storeDeleted records the store's DELETED event of pod web-0 with UID u,
// bound to node ("" for none) in phase.
func (b *hb) storeDeleted(t float64, u, node, phase string) *hb {
	obj := fmt.Sprintf(`{"metadata":{"namespace":"default","name":"web-0","uid":%q},"spec":{"nodeName":%q},"status":{"phase":%q}}`, u, node, phase)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreDeleted, Resource: "pods", Namespace: "default", Name: "web-0",
		RV: "42", Object: []byte(obj), T: secs(t)})
	return b
}

// pendingPod is web-0 (UID a), created and bound to n1, whose kubelet never
// started it (its node is cut off), force deleted at 10 s by identity.
func pendingPod(identity string, mods ...func(*history.APICall)) *hb {
	return (&hb{}).created(0.5, identityPet, "web-0", "a").
		force(10, identity, mods...).
		led(20, start, "n2", "web-1", "b")
}

// A force deletion forbids itself, running container or not: the store's
// record of the deleted object shows the pod bound and not terminal.
func TestAuthorityBoundPodNeverStarted(t *testing.T) {
	b := pendingPod(identityFencing).storeDeleted(10.01, "a", "n1", "Pending").
		call(11, identityFencing, "update", "nodes", "", "n1", sub("status"))
	res := mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "default/web-0" || len(ev.API) != 1 || ev.API[0].Identity != identityFencing || len(ev.Ledger) != 0 {
		t.Errorf("evidence %+v, want the fencing controller's deletion and no ledger entry", ev)
	}
	mustMention(t, "description", ev.Description, "PS-14", "fencing-controller delete pods default/web-0 grace 0",
		"bound to node n1", "phase Pending", "rv 42")

	tests := []struct {
		name    string
		b       *hb
		want    Verdict
		mention string
	}{
		{"fencing after the fence", (&hb{}).created(0.5, identityPet, "web-0", "a").
			call(8, identityFencing, "update", "nodes", "", "n1", sub("status")).
			force(10, identityFencing).storeDeleted(10.01, "a", "n1", "Pending").
			led(20, start, "n2", "web-1", "b"), Ok, "1 by the fencing controller after a fence"},
		{"a controller", pendingPod("pet-controller").storeDeleted(10.01, "a", "n1", "Running"), Illegal, "PS-9"},
		{"pod GC with the node in place", pendingPod(identityPodGC).storeDeleted(10.01, "a", "n1", ""), Illegal, "PS-10"},
		{"no ledger at all", (&hb{}).force(10, "node-controller").storeDeleted(10.01, "a", "n1", "Pending"), Illegal, "PS-9"},
		// Grace 0 is no force deletion for these (GP-6).
		{"terminal", pendingPod("pet-controller").storeDeleted(10.01, "a", "n1", "Failed"), Ok, "no container running"},
		{"succeeded", pendingPod("pet-controller").storeDeleted(10.01, "a", "n1", "Succeeded"), Ok, "no container running"},
		{"unbound", pendingPod("pet-controller").storeDeleted(10.01, "a", "", "Pending"), Ok, "no container running"},
		// The store's record must be of the UID the call removed.
		{"another UID of the name", pendingPod("pet-controller").storeDeleted(10.01, "z", "n1", "Pending"), Ok, "no container running"},
		{"no UID in the answer", (&hb{}).created(0.5, identityPet, "web-0", "a").
			call(10, "pet-controller", "delete", "pods", "default", "web-0", askGrace(0)).
			storeDeleted(10.01, "a", "n1", "Pending").led(20, start, "n2", "web-1", "b"), Ok, "no container running"},
		// A kubelet's grace-0 deletion is judged from the ledger alone.
		{"the pod's kubelet", pendingPod("kubelet:n1").storeDeleted(10.01, "a", "n1", "Running"), Ok, "1 by kubelets finishing"},
		{"refused", pendingPod("pet-controller", code(403), outcome(history.StatusFail)).storeDeleted(30, "a", "n1", "Running"), Ok, "none asking for grace 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustResult(t, CheckAuthority(bg, tt.b.history(), Options{}), tt.want, tt.mention)
		})
	}
}

// PS-14 is judged only in a history where the fencing controller ran: with
// no call of it (no fencing controller, as on the kube target) the result
// does not list PS-14, so it is not passed vacuously, and says so.
func TestAuthorityPS14NeedsFencingController(t *testing.T) {
	res := mustVerdict(t, CheckAuthority(bg, endPod(runningPod().force(10, identityAdmin)).history(), Options{}), Ok)
	if diff := cmp.Diff([]string{"PS-8", "PS-9", "PS-10"}, res.Guarantees); diff != "" {
		t.Errorf("guarantees without a fencing controller (-want +got):\n%s", diff)
	}
	mustMention(t, "summary", res.Summary, "PS-14 not judged: no fencing controller call")
	b := runningPod().call(2, identityFencing, "list", "nodes", "", "")
	res = mustVerdict(t, CheckAuthority(bg, endPod(b.force(10, identityAdmin)).history(), Options{}), Ok)
	if diff := cmp.Diff(forceGuarantees, res.Guarantees); diff != "" {
		t.Errorf("guarantees with a fencing controller (-want +got):\n%s", diff)
	}
	if strings.Contains(res.Summary, "PS-14 not judged") {
		t.Errorf("summary %q says PS-14 was not judged", res.Summary)
	}
}
