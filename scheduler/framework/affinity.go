package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// NamespaceLabels returns the labels of the namespace named ns, or nil if it
// is not known. A namespaceSelector of an affinity term is matched against
// them.
type NamespaceLabels func(ns string) labels.Set

// AffinityTerm is a PodAffinityTerm resolved against the pod that declares
// it: the label selector parsed (with matchLabelKeys and mismatchLabelKeys
// folded in from the declaring pod's labels) and the namespaces it looks in.
// It is immutable once built.
type AffinityTerm struct {
	TopologyKey string
	Selector    labels.Selector
	// Namespaces are the namespaces the term names; when it names none and
	// has no namespaceSelector, the declaring pod's own.
	Namespaces map[string]struct{}
	// NamespaceSelector, when not nil, adds the namespaces whose labels it
	// matches; an empty namespaceSelector ({}) matches every namespace.
	NamespaceSelector labels.Selector
}

// WeightedAffinityTerm is a preferred term and its weight (1..100).
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// Matches reports whether pod falls under the term: it lives in one of the
// term's namespaces and its labels match the selector. Pods being deleted
// still match: they hold their place until they are gone.
func (t *AffinityTerm) Matches(pod *corev1.Pod, nsLabels NamespaceLabels) bool {
	if _, ok := t.Namespaces[pod.Namespace]; !ok {
		if t.NamespaceSelector == nil {
			return false
		}
		if !t.NamespaceSelector.Empty() {
			var set labels.Set
			if nsLabels != nil {
				set = nsLabels(pod.Namespace)
			}
			if !t.NamespaceSelector.Matches(set) {
				return false
			}
		}
	}
	return t.Selector.Matches(labels.Set(pod.Labels))
}

// MatchesAll reports whether pod falls under every term (false for none).
func MatchesAll(terms []AffinityTerm, pod *corev1.Pod, nsLabels NamespaceLabels) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(pod, nsLabels) {
			return false
		}
	}
	return true
}

// NewAffinityTerm resolves term as declared by pod. A nil labelSelector
// selects no pod, as in the API.
func NewAffinityTerm(pod *corev1.Pod, term *corev1.PodAffinityTerm) (AffinityTerm, error) {
	out := AffinityTerm{TopologyKey: term.TopologyKey, Namespaces: map[string]struct{}{}}
	for _, ns := range term.Namespaces {
		out.Namespaces[ns] = struct{}{}
	}
	if term.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
		if err != nil {
			return AffinityTerm{}, fmt.Errorf("namespaceSelector: %w", err)
		}
		out.NamespaceSelector = sel
	} else if len(term.Namespaces) == 0 {
		out.Namespaces[pod.Namespace] = struct{}{}
	}
	if term.LabelSelector == nil {
		out.Selector = labels.Nothing()
		return out, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return AffinityTerm{}, fmt.Errorf("labelSelector: %w", err)
	}
	add := func(keys []string, op selection.Operator) error {
		for _, k := range keys {
			v, ok := pod.Labels[k]
			if !ok {
				continue
			}
			req, err := labels.NewRequirement(k, op, []string{v})
			if err != nil {
				return fmt.Errorf("label key %q: %w", k, err)
			}
			sel = sel.Add(*req)
		}
		return nil
	}
	if err := add(term.MatchLabelKeys, selection.Equals); err != nil {
		return AffinityTerm{}, fmt.Errorf("matchLabelKeys: %w", err)
	}
	if err := add(term.MismatchLabelKeys, selection.NotEquals); err != nil {
		return AffinityTerm{}, fmt.Errorf("mismatchLabelKeys: %w", err)
	}
	out.Selector = sel
	return out, nil
}

// AffinityTerms are a pod's inter-pod affinity terms, resolved.
type AffinityTerms struct {
	RequiredAffinity      []AffinityTerm
	RequiredAntiAffinity  []AffinityTerm
	PreferredAffinity     []WeightedAffinityTerm
	PreferredAntiAffinity []WeightedAffinityTerm
}

// Empty reports whether the pod has no inter-pod affinity at all.
func (a *AffinityTerms) Empty() bool {
	return a == nil || len(a.RequiredAffinity)+len(a.RequiredAntiAffinity)+
		len(a.PreferredAffinity)+len(a.PreferredAntiAffinity) == 0
}

// ParseAffinityTerms resolves every podAffinity and podAntiAffinity term of
// pod; nil when it has none. The first invalid term is an error.
func ParseAffinityTerms(pod *corev1.Pod) (*AffinityTerms, error) {
	a := pod.Spec.Affinity
	if a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		return nil, nil
	}
	out := &AffinityTerms{}
	required := func(terms []corev1.PodAffinityTerm, what string) ([]AffinityTerm, error) {
		var res []AffinityTerm
		for i := range terms {
			t, err := NewAffinityTerm(pod, &terms[i])
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", what, i, err)
			}
			res = append(res, t)
		}
		return res, nil
	}
	preferred := func(terms []corev1.WeightedPodAffinityTerm, what string) ([]WeightedAffinityTerm, error) {
		var res []WeightedAffinityTerm
		for i := range terms {
			t, err := NewAffinityTerm(pod, &terms[i].PodAffinityTerm)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", what, i, err)
			}
			res = append(res, WeightedAffinityTerm{AffinityTerm: t, Weight: terms[i].Weight})
		}
		return res, nil
	}
	var err error
	if pa := a.PodAffinity; pa != nil {
		if out.RequiredAffinity, err = required(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			"podAffinity.requiredDuringSchedulingIgnoredDuringExecution"); err != nil {
			return nil, err
		}
		if out.PreferredAffinity, err = preferred(pa.PreferredDuringSchedulingIgnoredDuringExecution,
			"podAffinity.preferredDuringSchedulingIgnoredDuringExecution"); err != nil {
			return nil, err
		}
	}
	if paa := a.PodAntiAffinity; paa != nil {
		if out.RequiredAntiAffinity, err = required(paa.RequiredDuringSchedulingIgnoredDuringExecution,
			"podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"); err != nil {
			return nil, err
		}
		if out.PreferredAntiAffinity, err = preferred(paa.PreferredDuringSchedulingIgnoredDuringExecution,
			"podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"); err != nil {
			return nil, err
		}
	}
	if out.Empty() {
		return nil, nil
	}
	return out, nil
}
