package apiserver

// Defaulting of the apps/v1 kinds, as upstream's SetDefaults_StatefulSet and
// SetDefaults_ReplicaSet, with their pod templates defaulted as pods are.

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// StatefulSet defaults, as kube-apiserver applies them.
const (
	defaultReplicas             = int32(1)
	defaultRevisionHistoryLimit = int32(10)
)

// defaultStatefulSet applies SetDefaults_StatefulSet: OrderedReady pod
// management, RollingUpdate with partition 0 and maxUnavailable 1 (the
// MaxUnavailableStatefulSet gate is on by default since 1.37), claims
// retained when the set is deleted or scaled, 1 replica, 10 revisions kept,
// the claim templates' and the pod template's defaults. kubectl rollout
// status and restart need the update strategy: without it they refuse the
// set.
func defaultStatefulSet(set *appsv1.StatefulSet) {
	spec := &set.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := spec.UpdateStrategy.RollingUpdate; spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		if ru.Partition == nil {
			ru.Partition = new(int32)
		}
		if ru.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			ru.MaxUnavailable = &one
		}
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		r := defaultReplicas
		spec.Replicas = &r
	}
	if spec.RevisionHistoryLimit == nil {
		r := defaultRevisionHistoryLimit
		spec.RevisionHistoryLimit = &r
	}
	for i := range spec.VolumeClaimTemplates {
		defaultClaim(&spec.VolumeClaimTemplates[i])
	}
	defaultPodSpec(&spec.Template.Spec)
}

// defaultClaim applies SetDefaults_PersistentVolumeClaim and its spec's:
// phase Pending, volumeMode Filesystem.
func defaultClaim(c *corev1.PersistentVolumeClaim) {
	if c.Status.Phase == "" {
		c.Status.Phase = corev1.ClaimPending
	}
	if c.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		c.Spec.VolumeMode = &m
	}
}

// defaultReplicaSet applies SetDefaults_ReplicaSet (1 replica) and the
// template's pod defaults.
func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		r := defaultReplicas
		rs.Spec.Replicas = &r
	}
	defaultPodSpec(&rs.Spec.Template.Spec)
}
