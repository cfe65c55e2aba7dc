package apiserver

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// The node restriction (RuleNodeRestriction, PS-1) is what upstream's Node
// authorizer and NodeRestriction admission plugin enforce for node
// identities, as it applies to podsafe's kubelets. The write table
// (kubeletGrants) already limits a kubelet to its Node and Node status,
// its Lease, pod status, pod deletion and pod eviction; restrictNode then
// limits each of these to its own node:
//
//   - Pods: it deletes (gracefully, or finally per PS-8) and evicts only
//     pods bound to it; an unbound pod, or one bound elsewhere, is not its
//     own. It never creates a pod (upstream lets a node create mirror pods;
//     podsafe has none) and never updates a pod's spec or metadata
//     (finalizers, ownerReferences, labels): upstream grants a node no pod
//     update at all. The status of its own pods is RulePodStatus's (LC-2).
//   - Its Node: it creates and updates only the Node named after it
//     (RuleHeartbeat, PS-13), and as upstream: it may set taints only when
//     it registers, never change them later (a node that drops a taint
//     steers to itself the pods the taint kept away, e.g. the node
//     controller's unreachable taint), never change its ownerReferences,
//     and set only the labels a kubelet may set (kubeletMaySetLabel): none
//     under node-restriction.kubernetes.io, and under kubernetes.io and
//     k8s.io only the well-known kubelet labels (hostname, zone, region,
//     instance type, os, arch) and the kubelet.kubernetes.io and
//     node.kubernetes.io namespaces. The fence record is RuleFence's
//     (PS-14), whoever writes.
//   - Its Lease: only in KubeLeaseNamespace and named after its node
//     (RuleHeartbeat, PS-13).
//
// Reads are not restricted (see Authorize).

// restrictNode judges a write by the kubelet of node that the write table
// granted and the resource rules allowed.
func restrictNode(req Request, node string) Decision {
	id := req.Identity
	switch req.Resource {
	case grPods:
		if req.Subresource == subStatus {
			return allow
		}
		old, _ := req.Old.(*corev1.Pod)
		switch {
		case old == nil:
			return refuse(RuleNodeRestriction, "%s may not %s pod %s: it writes only pods known to be bound to node %s", id, podVerb(req), podRef(req), node)
		case old.Spec.NodeName == "":
			return refuse(RuleNodeRestriction, "%s may not %s pod %s, which is not bound to any node; a kubelet deletes and evicts only the pods bound to it", id, podVerb(req), podRef(req))
		case old.Spec.NodeName != node:
			return refuse(RuleNodeRestriction, "%s may not %s pod %s, which is bound to %s; a kubelet deletes and evicts only the pods bound to it", id, podVerb(req), podRef(req), old.Spec.NodeName)
		}
		return allow
	case grNodes:
		return restrictOwnNode(req, node)
	}
	return allow
}

// podVerb says what a pod write does, for refusals.
func podVerb(req Request) string {
	if req.Subresource == subEviction {
		return "evict"
	}
	return req.Verb
}

// restrictOwnNode applies upstream's limits on a node writing its own Node
// object: taints only at registration, ownerReferences never, and only the
// labels a kubelet may set. The status subresource changes none of these.
func restrictOwnNode(req Request, node string) Decision {
	newNode, _ := req.Object.(*corev1.Node)
	if newNode == nil || req.Subresource != "" {
		return allow
	}
	oldNode, _ := req.Old.(*corev1.Node)
	if req.Verb == VerbCreate {
		oldNode = nil
	} else if oldNode == nil {
		return refuse(RuleNodeRestriction, "kubelet:%s may not %s node %s without the stored node to compare with", node, req.Verb, node)
	}
	if oldNode != nil && !apiequality.Semantic.DeepEqual(oldNode.Spec.Taints, newNode.Spec.Taints) {
		return refuse(RuleNodeRestriction, "kubelet:%s may not change the taints of node %s; a kubelet sets taints only when it registers its node", node, node)
	}
	if oldNode != nil && !apiequality.Semantic.DeepEqual(oldNode.OwnerReferences, newNode.OwnerReferences) {
		return refuse(RuleNodeRestriction, "kubelet:%s may not change the ownerReferences of node %s", node, node)
	}
	var oldLabels map[string]string
	if oldNode != nil {
		oldLabels = oldNode.Labels
	}
	if bad := forbiddenLabelChanges(oldLabels, newNode.Labels); len(bad) > 0 {
		return refuse(RuleNodeRestriction, "kubelet:%s may not set label %s on node %s; a kubelet sets only its well-known labels (kubernetes.io/hostname, topology.kubernetes.io/zone, ...) and those outside kubernetes.io and k8s.io",
			node, strings.Join(bad, ", "), node)
	}
	return allow
}

// forbiddenLabelChanges returns, sorted, the keys whose value (or presence)
// differs between old and upd and that a kubelet may not set.
func forbiddenLabelChanges(old, upd map[string]string) []string {
	var bad []string
	check := func(k string) {
		ov, ook := old[k]
		nv, nok := upd[k]
		if (ov != nv || ook != nok) && !kubeletMaySetLabel(k) && !slices.Contains(bad, k) {
			bad = append(bad, k)
		}
	}
	for k := range old {
		check(k)
	}
	for k := range upd {
		check(k)
	}
	sort.Strings(bad)
	return bad
}

// kubeletLabels are the well-known labels a kubelet sets on its own Node
// (upstream's k8s.io/kubelet/pkg/apis KubeletLabels).
var kubeletLabels = []string{
	corev1.LabelHostname,
	corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable, corev1.LabelArchStable,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}

// kubeletLabelNamespaces are the label namespaces (and their subdomains)
// a kubelet may use freely.
var kubeletLabelNamespaces = []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode}

// kubeletMaySetLabel reports whether a kubelet may add, change or remove
// label key on its own Node: never under node-restriction.kubernetes.io
// (labels an admin sets to steer workloads to trusted nodes); under
// kubernetes.io and k8s.io only kubeletLabels and kubeletLabelNamespaces;
// anything else.
func kubeletMaySetLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	within := func(domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }
	switch {
	case within(corev1.LabelNamespaceNodeRestriction):
		return false
	case !within("kubernetes.io") && !within("k8s.io"):
		return true
	case slices.Contains(kubeletLabels, key):
		return true
	}
	return slices.ContainsFunc(kubeletLabelNamespaces, within)
}
