// Package controller holds podsafe's control-plane controllers: node
// lifecycle (lease expiry, NodeDown, graceful eviction), pod garbage
// collection, the pet (StatefulSet) controller and the ReplicaSet controller.
//
// Each is an ordinary client-go controller (shared informers feeding a rate
// limited work queue) that talks to the API through its own clientset, so the
// API server's authority rules apply to it exactly as to a user's controller.
// None of them ever force deletes a pod, except pod GC for pods whose Node
// object no longer exists (PS-9, PS-10). Every controller takes a
// clock.WithTicker (nil: the real clock) for its timeouts, so a cluster can run
// them on a scaled clock.
package controller

import corev1 "k8s.io/api/core/v1"

// PodConditionNodeDown is the pod condition the node lifecycle controller sets
// (status True, reason ReasonNodeDown) on a pod it evicts because the pod's
// node stopped renewing its lease: the visible sign that the pod was stopped
// by a node partition rather than by a user (PS-13, PS-17).
const PodConditionNodeDown corev1.PodConditionType = "podsafe.io/NodeDown"

// ReasonNodeDown is the reason of PodConditionNodeDown and of the node's
// Ready=Unknown condition set by the node lifecycle controller.
const ReasonNodeDown = "NodeDown"

// TaintUnreachable is the NoExecute taint key put on a node whose lease
// expired, as Kubernetes names it.
const TaintUnreachable = corev1.TaintNodeUnreachable
