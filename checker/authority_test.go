package checker

import (
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
			res := mustVerdict(t, CheckAuthority(bg, tt.b.history(), Options{}), tt.want)
			text := res.Summary
			if len(res.Evidence) > 0 {
				text += "\n" + res.Evidence[0].Description
			}
			mustMention(t, "result", text, tt.mention)
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
