package checker

import (
	"fmt"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// orphanRun is ReplicaSet web (UID u-web) of namespace ns with pods web-a
// and web-b, which refer to it alone, and shared, which refers to it and
// to another owner; the workload deletes web asking for propagationPolicy
// Orphan at 10 s, the store removes it at 10.5 s, and the garbage
// collector then calls gc (each a pod name it deletes at 11 s).
func orphanRun(policy string, gc ...string) *hb {
	b := (&hb{}).embedded()
	obj := func(kind, name, uid, owners string) []byte {
		return []byte(fmt.Sprintf(`{"kind":%q,"metadata":{"namespace":"ns","name":%q,"uid":%q,"ownerReferences":[%s]}}`, kind, name, uid, owners))
	}
	ref := func(uid string) string {
		return fmt.Sprintf(`{"kind":"ReplicaSet","name":"x","uid":%q,"controller":true}`, uid)
	}
	b.h.Store = append(b.h.Store,
		history.StoreEvent{Type: history.StoreAdded, Resource: "replicasets.apps", Namespace: "ns", Name: "web", Object: obj("ReplicaSet", "web", "u-web", ""), T: secs(1)},
		history.StoreEvent{Type: history.StoreAdded, Resource: "pods", Namespace: "ns", Name: "web-a", Object: obj("Pod", "web-a", "p-a", ref("u-web")), T: secs(2)},
		history.StoreEvent{Type: history.StoreAdded, Resource: "pods", Namespace: "ns", Name: "web-b", Object: obj("Pod", "web-b", "p-b", ref("u-web")), T: secs(2)},
		history.StoreEvent{Type: history.StoreAdded, Resource: "pods", Namespace: "ns", Name: "shared", Object: obj("Pod", "shared", "p-s", ref("u-web")+","+ref("u-other")), T: secs(2)},
		history.StoreEvent{Type: history.StoreDeleted, Resource: "replicasets.apps", Namespace: "ns", Name: "web", Object: obj("ReplicaSet", "web", "u-web", ""), T: secs(10.5)},
	)
	b.h.Ops = append(b.h.Ops, history.Op{Process: 0, Func: "replicas:delete", Key: "ns/web", Value: "propagation=" + policy,
		Status: history.StatusOK, Invoke: secs(10), Return: secs(10.2)})
	for _, name := range gc {
		b.call(11, identityGC, "delete", "pods", "ns", name)
	}
	return b
}

// TestOrphanDeletions: the garbage collector deletes no dependent of an
// owner deleted with Orphan (PS-9).
func TestOrphanDeletions(t *testing.T) {
	res := mustVerdict(t, CheckAuthority(bg, orphanRun("Orphan", "web-a").history(), Options{}), Illegal)
	mustMention(t, "summary", res.Summary, "1 deletion by the garbage collector of dependents it should have orphaned")
	mustMention(t, "evidence", res.Evidence[0].Description, "PS-9: garbage-collector delete pods ns/web-a", "deleted pod ns/web-a, a dependent of ns/web, whose deletion asked for propagationPolicy Orphan")
	if len(res.Evidence[0].Ops) != 1 || len(res.Evidence[0].API) != 1 {
		t.Errorf("evidence %+v: want the workload's deletion and the collector's", res.Evidence[0])
	}
	if res.Guarantees[0] != "PS-9" {
		t.Errorf("guarantees %v, want PS-9", res.Guarantees)
	}

	// Orphaned, not deleted: said so.
	ok := orphanRun("Orphan")
	ok.call(11, "workload", "delete", "pods", "ns", "web-a") // someone else may
	res = mustVerdict(t, CheckAuthority(bg, ok.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "the garbage collector deleted none of 2 dependents of owners deleted with propagationPolicy Orphan")

	// A dependent with another owner may go when that one does; the
	// collector deleting web's pods after a Background deletion is its job.
	mustVerdict(t, CheckAuthority(bg, orphanRun("Orphan", "shared").history(), Options{}), Ok)
	mustVerdict(t, CheckAuthority(bg, orphanRun("Background", "web-a", "web-b").history(), Options{}), Ok)

	// Not the embedded target: the collector's calls are not all there.
	kube := orphanRun("Orphan", "web-a")
	kube.h.Meta.Extra[history.ExtraTarget] = "kube"
	res = mustVerdict(t, CheckAuthority(bg, kube.history(), Options{}), Ok)
	if res.Stats.Checked != 0 {
		t.Errorf("kube target: %d judged, want 0", res.Stats.Checked)
	}
}
