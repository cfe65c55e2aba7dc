package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPlanAttach: a volume is attached to the oldest bound, active pod's
// node only while no attachment exists; an existing attachment stays while
// any pod object using the volume on its node exists (terminating or
// terminated included), and only then becomes a detach candidate (PS-15).
func TestPlanAttach(t *testing.T) {
	va := func(node string, attached, deleting bool) *storagev1.VolumeAttachment {
		v := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "default.data-db-0"},
			Spec: storagev1.VolumeAttachmentSpec{NodeName: node}, Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
		if deleting {
			now := metav1.Now()
			v.DeletionTimestamp = &now
		}
		return v
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		va   *storagev1.VolumeAttachment
		want attachPlan
	}{
		{"no pods, no attachment", nil, nil, attachPlan{}},
		{"unbound pod waits for the scheduler", []*corev1.Pod{makePod("a").obj()}, nil, attachPlan{}},
		{"bound pod gets the volume", []*corev1.Pod{makePod("a").node("n1").obj()}, nil, attachPlan{attach: "n1"}},
		{"oldest bound pod wins", []*corev1.Pod{makePod("b").node("n2").created(20).obj(), makePod("a").node("n1").created(10).obj()}, nil, attachPlan{attach: "n1"}},
		{"terminating pod is not attached anew", []*corev1.Pod{makePod("a").node("n1").terminating().obj()}, nil, attachPlan{}},
		{"terminated pod is not attached anew", []*corev1.Pod{makePod("a").node("n1").phase(corev1.PodFailed).obj()}, nil, attachPlan{}},
		{"attachment not yet marked", []*corev1.Pod{makePod("a").node("n1").obj()}, va("n1", false, false), attachPlan{markAttached: true}},
		{"attached and in use", []*corev1.Pod{makePod("a").node("n1").obj()}, va("n1", true, false), attachPlan{}},
		{"terminating pod keeps its attachment", []*corev1.Pod{makePod("a").node("n1").terminating().obj()}, va("n1", true, false), attachPlan{}},
		{"terminated pod keeps its attachment until its object is gone", []*corev1.Pod{makePod("a").node("n1").phase(corev1.PodSucceeded).obj()}, va("n1", true, false), attachPlan{}},
		{"new pod on another node waits: no move, no detach while the old pod exists",
			[]*corev1.Pod{makePod("old").node("n1").terminating().obj(), makePod("new").node("n2").obj()}, va("n1", true, false), attachPlan{}},
		{"old pod gone: detach candidate", []*corev1.Pod{makePod("new").node("n2").obj()}, va("n1", true, false), attachPlan{detachCandidate: true}},
		{"no pod at all: detach candidate", nil, va("n1", true, false), attachPlan{detachCandidate: true}},
		{"attachment being deleted: wait", []*corev1.Pod{makePod("new").node("n2").obj()}, va("n1", true, true), attachPlan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range tc.pods {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}
			}
			got := planAttach(tc.pods, tc.va)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(attachPlan{})); diff != "" {
				t.Errorf("planAttach (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewPetVolumes: each claim template becomes a persistentVolumeClaim
// volume named <template>-<pet>, the same for every replacement of the pet.
func TestNewPetVolumes(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	set.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data"}, {Name: "scratch"}}
	pod := newPet(set, 1)
	var got []string
	for _, v := range pod.Spec.Volumes {
		claim := ""
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
		got = append(got, v.Name+"="+claim)
	}
	if diff := cmp.Diff([]string{"data=data-db-1", "scratch="}, got); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"prod.data-db-1"}, podVolumeIDs(pod)); diff != "" {
		t.Errorf("volume IDs (-want +got):\n%s", diff)
	}
}
