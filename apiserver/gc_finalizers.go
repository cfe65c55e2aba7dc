package apiserver

// The server's half of garbage collection, as kube-apiserver's generic
// registry does it: a DELETE's propagation policy becomes a finalizer the
// garbage collector acts on (orphan: it removes the owner's references from
// the dependents; foregroundDeletion: it deletes the dependents and waits
// for those blocking the owner), an object with finalizers is only marked
// deleted (deletionTimestamp, deletionGracePeriodSeconds 0) and stays, and
// the write that removes its last finalizer removes it.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// propagationPolicies are the DeleteOptions.propagationPolicy values, in
// upstream's order.
var propagationPolicies = []string{string(metav1.DeletePropagationForeground),
	string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan)}

// validatePropagation refuses a propagationPolicy upstream does not know,
// with ValidateDeleteOptions' 422.
func validatePropagation(opts *metav1.DeleteOptions) error {
	p := opts.PropagationPolicy
	if p == nil || slices.Contains(propagationPolicies, string(*p)) {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "",
		field.ErrorList{field.NotSupported(field.NewPath("propagationPolicy"), *p, propagationPolicies)})
}

// deletionFinalizers is deletionFinalizersForGarbageCollection of the
// generic registry: the finalizers an object has after a DELETE with opts,
// and whether they differ from current. An explicit policy decides (Orphan
// adds orphan, Foreground adds foregroundDeletion, Background neither, each
// removing the other); without one, a finalizer the object has stays, and
// otherwise the default of every resource podsafe serves applies
// (background: none). It is pure.
func deletionFinalizers(current []string, opts *metav1.DeleteOptions) (bool, []string) {
	orphan := slices.Contains(current, metav1.FinalizerOrphanDependents)
	foreground := !orphan && slices.Contains(current, metav1.FinalizerDeleteDependents)
	if p := opts.PropagationPolicy; p != nil {
		orphan, foreground = *p == metav1.DeletePropagationOrphan, *p == metav1.DeletePropagationForeground
	}
	out := slices.DeleteFunc(slices.Clone(current), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	if sameSet(current, out) {
		return false, current
	}
	return true, out
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(slices.Compact(as), slices.Compact(bs))
}

// markAsDeleting is the generic registry's markAsDeleting for an object
// that stays for its finalizers: deletionTimestamp now (or kept when
// earlier), deletionGracePeriodSeconds 0, generation bumped on the first
// deletion.
func markAsDeleting(m metav1.Object, now time.Time) {
	if m.GetDeletionTimestamp() == nil && m.GetGeneration() > 0 {
		m.SetGeneration(m.GetGeneration() + 1)
	}
	if ts := m.GetDeletionTimestamp(); ts == nil || ts.After(now) {
		t := metav1.NewTime(now)
		m.SetDeletionTimestamp(&t)
	}
	zero := int64(0)
	m.SetDeletionGracePeriodSeconds(&zero)
}

// deleteWithFinalizers is the generic deletion of an object that is not a
// pod: when the DELETE leaves it finalizers (its own, or the one the
// propagation policy adds), it is marked deleted and stored with them, and
// the answer is the object (true); otherwise it returns false and the caller
// removes it.
func (s *Server) deleteWithFinalizers(ctx context.Context, ri *requestInfo, cur runtime.Object, rv uint64, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	m, err := metaOf(cur)
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	changed, fins := deletionFinalizers(m.GetFinalizers(), opts)
	if len(fins) == 0 {
		return nil, false, nil
	}
	if !changed && m.GetDeletionTimestamp() != nil && m.GetDeletionGracePeriodSeconds() != nil && *m.GetDeletionGracePeriodSeconds() == 0 {
		return cur, true, nil
	}
	out := cur.DeepCopyObject()
	om, _ := metaOf(out)
	markAsDeleting(om, s.clock.Now())
	om.SetFinalizers(fins)
	data, err := ri.res.encodeForStore(out)
	if err != nil {
		return nil, true, err
	}
	written, err := s.store.Update(ctx, ri.key(), data, raftstore.Preconditions{ResourceVersion: rv})
	if err != nil {
		return nil, true, err
	}
	obj, err := ri.res.decodeStored(written.Data)
	return obj, true, err
}

// finishDeletion removes an object an update has just written (at rv) when
// nothing holds it any more, as the generic registry's
// ShouldDeleteDuringUpdate (and the namespace registry's, which also waits
// for spec.finalizers): a deletionTimestamp, no finalizers, and a
// deletionGracePeriodSeconds of 0 or none (a pod terminating gracefully is
// removed by its kubelet's final DELETE). A removal another writer made
// first is no error.
func (s *Server) finishDeletion(ctx context.Context, res *resourceInfo, key raftstore.Key, obj runtime.Object, rv uint64) error {
	m, err := metaOf(obj)
	if err != nil || m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return nil
	}
	if g := m.GetDeletionGracePeriodSeconds(); g != nil && *g != 0 {
		return nil
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return nil
	}
	_, err = s.store.Delete(ctx, key, raftstore.Preconditions{ResourceVersion: rv})
	if errors.Is(err, raftstore.ErrNotFound) {
		return nil
	}
	return storeError(err, res.gr, key.Name)
}

// standardFinalizers are the finalizer names that need no domain.
var standardFinalizers = []string{string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// validateFinalizerName is upstream's ValidateFinalizerName: a qualified
// name, and one without a domain must be a standard finalizer.
func validateFinalizerName(name string) []string {
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return msgs
	}
	if !strings.Contains(name, "/") && !slices.Contains(standardFinalizers, name) {
		return []string{"name is neither a standard finalizer name nor is it fully qualified"}
	}
	return nil
}
