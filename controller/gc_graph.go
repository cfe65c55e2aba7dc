package controller

import (
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// gcNode is one object as the garbage collector knows it: who it is, whom
// it belongs to and how far its deletion has come.
type gcNode struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	namespace  string
	name       string
	uid        types.UID
	owners     []metav1.OwnerReference
	deleting   bool // deletionTimestamp set
	finalizers []string
}

// hasFinalizer reports whether the node carries finalizer f.
func (n *gcNode) hasFinalizer(f string) bool { return slices.Contains(n.finalizers, f) }

// waitingForDependents reports whether the node is deleted in the
// foreground: it stays until its blocking dependents are gone.
func (n *gcNode) waitingForDependents() bool {
	return n.deleting && n.hasFinalizer(metav1.FinalizerDeleteDependents)
}

// orphaning reports whether the node is deleted with orphan propagation.
func (n *gcNode) orphaning() bool {
	return n.deleting && n.hasFinalizer(metav1.FinalizerOrphanDependents)
}

// sameGCState reports whether a and b differ in nothing the collector acts
// on, so an update between them needs no work.
func sameGCState(a, b *gcNode) bool {
	return a.deleting == b.deleting && slices.Equal(a.finalizers, b.finalizers) && slices.EqualFunc(a.owners, b.owners,
		func(x, y metav1.OwnerReference) bool {
			return x.UID == y.UID && x.Name == y.Name && x.Kind == y.Kind && x.APIVersion == y.APIVersion &&
				ptrBool(x.BlockOwnerDeletion) == ptrBool(y.BlockOwnerDeletion)
		})
}

func ptrBool(p *bool) bool { return p != nil && *p }

// gcGraph is the ownership graph: every watched object by UID, and the
// dependents of every UID named as an owner, whether or not that owner
// exists. Safe for concurrent use; nodes handed out are not modified
// afterwards (a change replaces the node).
type gcGraph struct {
	mu         sync.Mutex
	nodes      map[types.UID]*gcNode
	dependents map[types.UID]map[types.UID]struct{}
}

func newGCGraph() *gcGraph {
	return &gcGraph{nodes: map[types.UID]*gcNode{}, dependents: map[types.UID]map[types.UID]struct{}{}}
}

// upsert stores n and returns the node it replaced (nil when new).
func (g *gcGraph) upsert(n *gcNode) *gcNode {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[n.uid]
	if old != nil {
		g.unlinkLocked(old)
	}
	g.nodes[n.uid] = n
	for _, o := range n.owners {
		deps := g.dependents[o.UID]
		if deps == nil {
			deps = map[types.UID]struct{}{}
			g.dependents[o.UID] = deps
		}
		deps[n.uid] = struct{}{}
	}
	return old
}

// remove forgets the node of uid and returns it (nil when unknown).
func (g *gcGraph) remove(uid types.UID) *gcNode {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[uid]
	if old != nil {
		g.unlinkLocked(old)
		delete(g.nodes, uid)
	}
	return old
}

func (g *gcGraph) unlinkLocked(n *gcNode) {
	for _, o := range n.owners {
		if deps := g.dependents[o.UID]; deps != nil {
			delete(deps, n.uid)
			if len(deps) == 0 {
				delete(g.dependents, o.UID)
			}
		}
	}
}

// get returns the node of uid, or nil.
func (g *gcGraph) get(uid types.UID) *gcNode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[uid]
}

// dependentsOf returns the nodes that name uid as an owner.
func (g *gcGraph) dependentsOf(uid types.UID) []*gcNode {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*gcNode, 0, len(g.dependents[uid]))
	for d := range g.dependents[uid] {
		if n := g.nodes[d]; n != nil {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *gcNode) int { return strings.Compare(string(a.uid), string(b.uid)) })
	return out
}

// blocking returns the dependents of owner whose reference to it has
// blockOwnerDeletion: a foreground deletion waits for them to be gone.
func blocking(owner types.UID, dependents []*gcNode) []*gcNode {
	var out []*gcNode
	for _, d := range dependents {
		for _, o := range d.owners {
			if o.UID == owner && ptrBool(o.BlockOwnerDeletion) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// ownerState is what the collector found of one owner reference.
type ownerState int

const (
	// ownerSolid exists and is not deleted in the foreground.
	ownerSolid ownerState = iota
	// ownerDangling does not exist (by UID where the reference says).
	ownerDangling
	// ownerWaiting exists and is deleted in the foreground.
	ownerWaiting
)

// decideDependent is the garbage collector's attemptToDeleteItem for an
// object not being deleted itself, from its owner references and what was
// found of each: with no solid owner (all dangling, or some deleted in the
// foreground) the object is to be deleted (remove true); with a solid owner
// left, it keeps the references to solid owners, loses those to dangling
// ones, and its references to owners deleted in the foreground stop
// blocking them, and refs is that new list when it differs (patch true). It
// is pure.
func decideDependent(owners []metav1.OwnerReference, states []ownerState) (remove, patch bool, refs []metav1.OwnerReference) {
	if len(owners) == 0 {
		return false, false, nil
	}
	solid := slices.Contains(states, ownerSolid)
	if !solid {
		return true, false, nil
	}
	for i, o := range owners {
		switch states[i] {
		case ownerDangling:
			patch = true
			continue
		case ownerWaiting:
			if ptrBool(o.BlockOwnerDeletion) {
				o.BlockOwnerDeletion = new(bool)
				patch = true
			}
		}
		refs = append(refs, o)
	}
	if !patch {
		return false, false, nil
	}
	return false, true, refs
}
