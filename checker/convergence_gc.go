package checker

import (
	"slices"
	"strings"
)

// The convergence rules of the garbage collector: once settled, no object
// refers to an owner that is gone, and no owner the collector holds for
// its dependents is left once they are gone.

// Finalizers the garbage collector puts on an owner deleted with the
// Foreground or Orphan propagation policy, and removes once it has dealt
// with the dependents.
const (
	finalizerForeground = "foregroundDeletion"
	finalizerOrphan     = "orphan"
)

// gcOwnerKinds are the owners whose objects the final state follows. A
// reference to one of them is judged only when the store lines record the
// owner's removal (FinalState.Gone): an owner never seen, such as one of a
// resource the history does not follow, is not known to be gone.
var gcOwnerKinds = []string{"ReplicaSet", "StatefulSet", "Deployment"}

// collectorRules judges what the garbage collector leaves (PS-9: it acts
// by graceful deletion). An owner deleted in the background is gone at
// once and its dependents must then be marked for deletion; one deleted
// with Orphan keeps its dependents, which must then no longer refer to it;
// one deleted in the Foreground stays until its dependents are gone, and
// must then go. So, once settled:
//   - a pod or ReplicaSet not marked for deletion refers to no gone
//     owner (whatever the policy was);
//   - an owner held only by the collector's finalizers, whose dependents
//     are all gone, is gone too.
//
// A dependent marked for deletion is the other rules' to judge (a pod's
// kubelet finishes it, PS-4).
func (j *judgment) collectorRules() {
	live := map[string]bool{}
	for _, m := range j.ownerMetas() {
		live[m.UID] = true
	}
	gone := func(kind string, m *cvMeta) {
		if m.DeletionTimestamp != nil {
			return
		}
		for _, o := range m.OwnerReferences {
			if slices.Contains(gcOwnerKinds, o.Kind) && j.st.Gone[o.UID] && !live[o.UID] {
				j.add(kind, m, "PS-9", "refers to %s %s (uid %s), which is gone, yet is not marked for deletion: the garbage collector neither collected it nor orphaned it", o.Kind, o.Name, o.UID)
				return
			}
		}
	}
	dependents := map[string]int{} // owner UID -> objects that still refer to it
	for i := range j.pods {
		p := &j.pods[i]
		gone("pod", &p.Metadata)
		for _, o := range p.Metadata.OwnerReferences {
			dependents[o.UID]++
		}
	}
	for i := range j.rss {
		rs := &j.rss[i]
		gone("replicaset", &rs.Metadata)
		for _, o := range rs.Metadata.OwnerReferences {
			dependents[o.UID]++
		}
	}
	for _, owners := range []struct {
		kind string
		ms   []*cvMeta
	}{{"replicaset", metas(j.rss)}, {"statefulset", metas(j.sets)}, {"deployment", deploymentMetas(j.deployments)}} {
		for _, m := range owners.ms {
			if m.DeletionTimestamp == nil || len(m.Finalizers) == 0 || dependents[m.UID] > 0 {
				continue
			}
			if slices.ContainsFunc(m.Finalizers, func(f string) bool { return f != finalizerForeground && f != finalizerOrphan }) {
				continue // someone else's finalizer holds it
			}
			j.add(owners.kind, m, "PS-9", "marked for deletion and held by the garbage collector's finalizers (%s), yet still there though no object refers to it: the collector has not finished its deletion", strings.Join(m.Finalizers, ", "))
		}
	}
}

// ownerMetas lists the metadata of every object of gcOwnerKinds.
func (j *judgment) ownerMetas() []*cvMeta {
	return slices.Concat(metas(j.rss), metas(j.sets), deploymentMetas(j.deployments))
}

func metas(sets []cvSet) []*cvMeta {
	out := make([]*cvMeta, len(sets))
	for i := range sets {
		out[i] = &sets[i].Metadata
	}
	return out
}

func deploymentMetas(ds []cvDeployment) []*cvMeta {
	out := make([]*cvMeta, len(ds))
	for i := range ds {
		out[i] = &ds[i].Metadata
	}
	return out
}
