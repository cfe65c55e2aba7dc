package apiserver

// The lifecycle of Namespaces as kube-apiserver serves it (the namespace
// registry of pkg/registry/core/namespace and the NamespaceLifecycle
// admission plugin): a new namespace is Active with the "kubernetes"
// finalizer in spec.finalizers; DELETE marks it Terminating and keeps it;
// the namespace controller deletes its content and removes the finalizer
// through namespaces/{name}/finalize; the namespace goes once spec.finalizers
// and metadata.finalizers are both empty. Admission refuses new objects in a
// namespace that does not exist (404) or is terminating (403).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// subFinalize is the namespaces subresource that writes spec.finalizers.
const subFinalize = "finalize"

// ensureKubernetesFinalizer gives a new namespace the "kubernetes" finalizer,
// as the namespace strategy's PrepareForCreate does: the namespace
// controller removes it once the namespace's content is gone.
func ensureKubernetesFinalizer(ns *corev1.Namespace) {
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
}

// admitNamespaceLifecycle is the create-time step of the namespace
// lifecycle: a new Namespace gets its finalizer; a new namespaced object,
// when Config.NamespaceLifecycle is on, must name a namespace that exists
// (404 naming the namespace, as upstream) and is not terminating (403).
// Namespaces the cache does not hold, and namespaces this server marked
// terminating while the cache still says Active, are read from the store
// before the decision, so a namespace created (or deleted) just before is
// seen as such.
func (s *Server) admitNamespaceLifecycle(ctx context.Context, ri *requestInfo, obj runtime.Object) error {
	if ns, ok := obj.(*corev1.Namespace); ok {
		ensureKubernetesFinalizer(ns)
		return nil
	}
	if !ri.res.namespaced || !s.cfg.NamespaceLifecycle {
		return nil
	}
	s.namespaces.ensureStarted(s.ctx)
	name := ri.namespace
	phase, found, synced := s.namespaces.phase(name)
	if !found || !synced || phase == corev1.NamespaceActive && s.namespaces.recentlyDeleted(name, time.Now()) {
		stored, err := s.store.Get(ctx, raftstore.Key{Resource: nsResource, Name: name})
		if errors.Is(err, raftstore.ErrNotFound) {
			return apierrors.NewNotFound(grNamespaces, name)
		}
		if err != nil {
			return storeError(err, grNamespaces, name)
		}
		phase = namespacePhase(stored.Data)
	}
	if phase != corev1.NamespaceTerminating {
		return nil
	}
	m, _ := metaOf(obj)
	err := apierrors.NewForbidden(ri.res.gr, m.GetName(), fmt.Errorf(
		"unable to create new content in namespace %s because it is being terminated", name))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", name),
		Field:   "metadata.namespace",
	})
	return err
}

// keepNamespaceFinalizers keeps a namespace's spec.finalizers through an
// update of the object or its status: only namespaces/finalize changes them.
func keepNamespaceFinalizers(cur, out runtime.Object) {
	c, ok := cur.(*corev1.Namespace)
	o, ok2 := out.(*corev1.Namespace)
	if ok && ok2 {
		o.Spec.Finalizers = slices.Clone(c.Spec.Finalizers)
	}
}

// finalizedNamespace is what a write to namespaces/{name}/finalize stores:
// the stored namespace with the request's spec.finalizers and nothing else
// of it. Each finalizer must be a qualified name, as upstream validates
// them.
func finalizedNamespace(cur, upd runtime.Object) (runtime.Object, error) {
	c, ok := cur.(*corev1.Namespace)
	u, ok2 := upd.(*corev1.Namespace)
	if !ok || !ok2 {
		return nil, apierrors.NewBadRequest("namespaces/finalize takes a Namespace")
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "finalizers")
	for i, f := range u.Spec.Finalizers {
		if msgs := validateFinalizerName(string(f)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), f, msgs[0]))
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind(), c.Name, errs)
	}
	out := c.DeepCopy()
	out.Spec.Finalizers = slices.Clone(u.Spec.Finalizers)
	return out, nil
}

// namespaceDeletion is the first DELETE of a namespace, as the namespace
// registry's Delete does it: deletionTimestamp now, phase Terminating, and
// the orphan or foregroundDeletion finalizer as the propagation policy asks
// (the namespace keeps the ones it has when none is given). It returns the
// namespace to store; it is pure.
func namespaceDeletion(ns *corev1.Namespace, opts *metav1.DeleteOptions, now time.Time) *corev1.Namespace {
	out := ns.DeepCopy()
	if out.DeletionTimestamp == nil {
		ts := metav1.NewTime(now)
		out.DeletionTimestamp = &ts
	}
	out.Status.Phase = corev1.NamespaceTerminating
	has := func(f string) bool { return slices.Contains(out.Finalizers, f) }
	orphan, foreground := has(metav1.FinalizerOrphanDependents), has(metav1.FinalizerDeleteDependents)
	if p := opts.PropagationPolicy; p != nil {
		orphan, foreground = *p == metav1.DeletePropagationOrphan, *p == metav1.DeletePropagationForeground
	}
	out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	if orphan {
		out.Finalizers = append(out.Finalizers, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out.Finalizers = append(out.Finalizers, metav1.FinalizerDeleteDependents)
	}
	return out
}

// deleteNamespace answers a DELETE of a namespace that needs no removal yet:
// the first one marks it terminating (namespaceDeletion) and every later
// one, while spec.finalizers is not empty, leaves it as it is. It returns
// the namespace and true when it did either; false when the namespace is
// finalized and the generic deletion (finalizers, then removal) decides.
func (s *Server) deleteNamespace(ctx context.Context, ri *requestInfo, ns *corev1.Namespace, rv uint64, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if ns.DeletionTimestamp != nil {
		if len(ns.Spec.Finalizers) > 0 {
			return ns, true, nil
		}
		return nil, false, nil
	}
	data, err := ri.res.encodeForStore(namespaceDeletion(ns, opts, s.clock.Now()))
	if err != nil {
		return nil, true, err
	}
	written, err := s.store.Update(ctx, ri.key(), data, raftstore.Preconditions{ResourceVersion: rv})
	if err != nil {
		return nil, true, err
	}
	if !isDryRun(ctx) {
		s.namespaces.markDeleted(ns.Name, time.Now())
	}
	out, err := ri.res.decodeStored(written.Data)
	return out, true, err
}
