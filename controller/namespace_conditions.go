package controller

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The deletion conditions of a terminating namespace, as kube-controller-
// manager's namespace controller reports them: every type is present, False
// with its "ok" reason and message unless something went wrong.
var (
	nsConditionTypes = []corev1.NamespaceConditionType{
		corev1.NamespaceDeletionDiscoveryFailure,
		corev1.NamespaceDeletionGVParsingFailure,
		corev1.NamespaceDeletionContentFailure,
		corev1.NamespaceContentRemaining,
		corev1.NamespaceFinalizersRemaining,
	}
	nsOKMessages = map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "All resources successfully discovered",
		corev1.NamespaceDeletionGVParsingFailure: "All legacy kube types successfully parsed",
		corev1.NamespaceDeletionContentFailure:   "All content successfully deleted, may be waiting on finalization",
		corev1.NamespaceContentRemaining:         "All content successfully removed",
		corev1.NamespaceFinalizersRemaining:      "All content-preserving finalizers finished",
	}
	nsOKReasons = map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "ResourcesDiscovered",
		corev1.NamespaceDeletionGVParsingFailure: "ParsedGroupVersions",
		corev1.NamespaceDeletionContentFailure:   "ContentDeleted",
		corev1.NamespaceContentRemaining:         "ContentRemoved",
		corev1.NamespaceFinalizersRemaining:      "ContentHasNoFinalizers",
	}
)

// nsDeletionReport is what one pass over a terminating namespace found.
type nsDeletionReport struct {
	// discoveryErr is the failure to discover the served resources.
	discoveryErr error
	// deleteErrs are the failures to list or delete content.
	deleteErrs []error
	// remaining counts the objects left, by resource.
	remaining map[schema.GroupVersionResource]int
	// finalizers counts the objects left with each finalizer.
	finalizers map[string]int
}

// conditions returns the namespace conditions the report calls for, one of
// every type, as the namespace controller's condition updater words them.
func (r nsDeletionReport) conditions() []corev1.NamespaceCondition {
	bad := map[corev1.NamespaceConditionType][2]string{}
	if r.discoveryErr != nil {
		bad[corev1.NamespaceDeletionDiscoveryFailure] = [2]string{"DiscoveryFailed", r.discoveryErr.Error()}
	}
	if len(r.deleteErrs) > 0 {
		msgs := make([]string, 0, len(r.deleteErrs))
		for _, e := range r.deleteErrs {
			msgs = append(msgs, e.Error())
		}
		sort.Strings(msgs)
		bad[corev1.NamespaceDeletionContentFailure] = [2]string{"ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", "))}
	}
	var left []string
	for gvr, n := range r.remaining {
		if n > 0 {
			left = append(left, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
	}
	if len(left) > 0 {
		sort.Strings(left)
		bad[corev1.NamespaceContentRemaining] = [2]string{"SomeResourcesRemain", "Some resources are remaining: " + strings.Join(left, ", ")}
	}
	var fins []string
	for f, n := range r.finalizers {
		if n > 0 {
			fins = append(fins, fmt.Sprintf("%s in %d resource instances", f, n))
		}
	}
	if len(fins) > 0 {
		sort.Strings(fins)
		bad[corev1.NamespaceFinalizersRemaining] = [2]string{"SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: " + strings.Join(fins, ", ")}
	}
	out := make([]corev1.NamespaceCondition, 0, len(nsConditionTypes))
	for _, t := range nsConditionTypes {
		c := corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: nsOKReasons[t], Message: nsOKMessages[t]}
		if b, ok := bad[t]; ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, b[0], b[1]
		}
		out = append(out, c)
	}
	return out
}

// done reports whether the namespace has no content left and every step
// succeeded, so it may be finalized.
func (r nsDeletionReport) done() bool {
	if r.discoveryErr != nil || len(r.deleteErrs) > 0 {
		return false
	}
	for _, n := range r.remaining {
		if n > 0 {
			return false
		}
	}
	return true
}

// updateNamespaceConditions merges want into status as upstream's
// updateConditions does: a condition changes only when its status, reason
// or message does, and its transition time only when its status does. It
// reports whether anything changed.
func updateNamespaceConditions(status *corev1.NamespaceStatus, want []corev1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, w := range want {
		i := -1
		for j := range status.Conditions {
			if status.Conditions[j].Type == w.Type {
				i = j
			}
		}
		if i < 0 {
			w.LastTransitionTime = now
			status.Conditions = append(status.Conditions, w)
			changed = true
			continue
		}
		old := &status.Conditions[i]
		if old.Status == w.Status && old.Reason == w.Reason && old.Message == w.Message {
			continue
		}
		if old.Status != w.Status {
			old.LastTransitionTime = now
		}
		old.Status, old.Reason, old.Message = w.Status, w.Reason, w.Message
		changed = true
	}
	return changed
}
