package apiserver

// Defaulting of apps/v1 Deployments, as upstream's SetDefaults_Deployment.

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Deployment defaults kube-apiserver applies.
const (
	// defaultMaxSurgeUnavailable is both maxSurge and maxUnavailable of a
	// RollingUpdate strategy that names neither.
	defaultMaxSurgeUnavailable = "25%"
	// defaultProgressDeadlineSeconds is how long a rollout may make no
	// progress before Progressing turns False (ProgressDeadlineExceeded).
	defaultProgressDeadlineSeconds = int32(600)
)

// defaultDeployment applies SetDefaults_Deployment: 1 replica, the
// RollingUpdate strategy with 25% surge and 25% unavailable, 10 old
// ReplicaSets kept, a 600 s progress deadline, and the template's pod
// defaults. A Recreate strategy gets no rollingUpdate (validation refuses
// one).
func defaultDeployment(d *appsv1.Deployment) {
	spec := &d.Spec
	if spec.Replicas == nil {
		r := defaultReplicas
		spec.Replicas = &r
	}
	if spec.Strategy.Type == "" {
		spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if spec.Strategy.RollingUpdate == nil {
			spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		ru := spec.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			v := intstr.FromString(defaultMaxSurgeUnavailable)
			ru.MaxUnavailable = &v
		}
		if ru.MaxSurge == nil {
			v := intstr.FromString(defaultMaxSurgeUnavailable)
			ru.MaxSurge = &v
		}
	}
	if spec.RevisionHistoryLimit == nil {
		r := defaultRevisionHistoryLimit
		spec.RevisionHistoryLimit = &r
	}
	if spec.ProgressDeadlineSeconds == nil {
		p := defaultProgressDeadlineSeconds
		spec.ProgressDeadlineSeconds = &p
	}
	defaultPodSpec(&spec.Template.Spec)
}
