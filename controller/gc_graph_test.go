package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func gcOwned(uid types.UID, owners ...metav1.OwnerReference) *gcNode {
	return &gcNode{name: string(uid), uid: uid, owners: owners}
}

func gcOwner(uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: uid, BlockOwnerDeletion: ptr.To(true)}
}

// TestGCGraphDependents: an owner's dependents are those that name it now;
// one that leaves (removed, or updated to another owner) is no longer
// listed, and the others stay.
func TestGCGraphDependents(t *testing.T) {
	g := newGCGraph()
	g.upsert(gcOwned("a", gcOwner("o")))
	g.upsert(gcOwned("b", gcOwner("o")))
	g.upsert(gcOwned("c", gcOwner("o")))
	deps := func(owner types.UID) []string {
		var out []string
		for _, n := range g.dependentsOf(owner) {
			out = append(out, string(n.uid))
		}
		slices.Sort(out)
		return out
	}
	if got := deps("o"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("dependents of o: %v, want a b c", got)
	}
	if g.remove("a") == nil {
		t.Fatal("remove(a) found nothing")
	}
	if got := deps("o"); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("dependents of o after a was removed: %v, want b c", got)
	}
	if old := g.upsert(gcOwned("b", gcOwner("p"))); old == nil {
		t.Error("upsert of b returned no old node")
	}
	if got := deps("o"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("dependents of o after b moved to p: %v, want c", got)
	}
	if got := deps("p"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("dependents of p: %v, want b", got)
	}
	g.remove("c")
	if got := deps("o"); len(got) != 0 {
		t.Errorf("dependents of o once none names it: %v", got)
	}
	if g.remove("c") != nil {
		t.Error("removing c twice found it again")
	}
}

// TestSameGCState: an update needs the collector's attention when it
// changes the deletion, the finalizers or any field of an owner reference
// the collector reads.
func TestSameGCState(t *testing.T) {
	base := func() *gcNode {
		n := gcOwned("x", gcOwner("o"))
		n.finalizers = []string{"f"}
		return n
	}
	if !sameGCState(base(), base()) {
		t.Fatal("a node differs from its copy")
	}
	for name, change := range map[string]func(n *gcNode){
		"deleting":   func(n *gcNode) { n.deleting = true },
		"finalizers": func(n *gcNode) { n.finalizers = nil },
		"owner UID":  func(n *gcNode) { n.owners[0].UID = "o2" },
		"owner name": func(n *gcNode) { n.owners[0].Name = "rs2" },
		"owner kind": func(n *gcNode) { n.owners[0].Kind = "StatefulSet" },
		"owner API":  func(n *gcNode) { n.owners[0].APIVersion = "apps/v2" },
		"blocking":   func(n *gcNode) { n.owners[0].BlockOwnerDeletion = nil },
		"owners":     func(n *gcNode) { n.owners = append(n.owners, gcOwner("o3")) },
	} {
		b := base()
		change(b)
		if sameGCState(base(), b) || sameGCState(b, base()) {
			t.Errorf("a change of %s is not seen", name)
		}
	}
	// A blocking reference given as false is no different from none.
	b := base()
	b.owners[0].BlockOwnerDeletion = ptr.To(false)
	a := base()
	a.owners[0].BlockOwnerDeletion = nil
	if !sameGCState(a, b) {
		t.Error("blockOwnerDeletion false differs from unset")
	}
}
