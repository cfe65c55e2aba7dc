package apiserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// simTemplate is a pod template with one container and labels app=name.
func simTemplate(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "sim:1"}}}}
}

// defaultedTemplate is simTemplate(name) as SetDefaults_PodSpec and
// SetDefaults_Container leave it: no enableServiceLinks (pods only).
func defaultedTemplate(name string) corev1.PodTemplateSpec {
	t := simTemplate(name)
	t.Spec.RestartPolicy = corev1.RestartPolicyAlways
	t.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	t.Spec.DNSPolicy = corev1.DNSClusterFirst
	t.Spec.SchedulerName = corev1.DefaultSchedulerName
	t.Spec.SecurityContext = &corev1.PodSecurityContext{}
	c := &t.Spec.Containers[0]
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	c.ImagePullPolicy = corev1.PullIfNotPresent
	return t
}

// TestDefaultStatefulSet: SetDefaults_StatefulSet's values, the claim
// templates' and the template's pod defaults; what a client set is kept.
func TestDefaultStatefulSet(t *testing.T) {
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	bare := appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: simTemplate("db"),
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim}}}
	full := bare.DeepCopy()
	full.Spec.Replicas = ptr.To[int32](1)
	full.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	full.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	full.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	full.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	full.Spec.Template = defaultedTemplate("db")
	full.Spec.VolumeClaimTemplates[0].Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	full.Spec.VolumeClaimTemplates[0].Status.Phase = corev1.ClaimPending

	onDelete := bare.DeepCopy()
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	onDeleteWant := full.DeepCopy()
	onDeleteWant.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}

	chosen := bare.DeepCopy()
	chosen.Spec.Replicas = ptr.To[int32](0)
	chosen.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	chosen.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}
	chosen.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
	chosenWant := full.DeepCopy()
	chosenWant.Spec.Replicas = ptr.To[int32](0)
	chosenWant.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	chosenWant.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
	chosenWant.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType

	for _, tc := range []struct {
		name     string
		in, want *appsv1.StatefulSet
	}{
		{"everything defaulted", &bare, full},
		{"OnDelete gets no rollingUpdate", onDelete, onDeleteWant},
		{"a client's choices stay", chosen, chosenWant},
		{"defaulting twice changes nothing", full.DeepCopy(), full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.DeepCopy()
			applyDefaults(got)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestDefaultReplicaSet: 1 replica and the template's pod defaults, a
// negative template grace kept (SetDefaults_Pod is for pods) and no limits
// copied to requests in a template.
func TestDefaultReplicaSet(t *testing.T) {
	in := appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: simTemplate("web")}}
	in.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	want := in.DeepCopy()
	want.Spec.Replicas = ptr.To[int32](1)
	want.Spec.Template = defaultedTemplate("web")
	want.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	got := in.DeepCopy()
	applyDefaults(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	zero := in.DeepCopy()
	zero.Spec.Replicas = ptr.To[int32](0)
	applyDefaults(zero)
	if *zero.Spec.Replicas != 0 {
		t.Errorf("replicas 0 defaulted to %d", *zero.Spec.Replicas)
	}
}
