package kubelet

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// TestCSIClaimsResolvedOnce: a pod's claims are resolved to their CSI
// volumes on the first pass of its worker and kept, for this pod and
// beside other pods', so later passes read neither claim nor volume again;
// until the volume is reported in use, the pod waits for that.
func TestCSIClaimsResolvedOnce(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	for _, name := range []string{"a", "b"} {
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.podsafe.io", VolumeHandle: "vol-" + name}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().PersistentVolumeClaims("ns").Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + name, Namespace: "ns"},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := &Kubelet{cfg: Config{Client: client, NodeName: "node-1", CSIAttachments: true, RequestTimeout: time.Minute},
		log: slog.New(slog.DiscardHandler), workers: map[types.UID]*podWorker{}}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}}}
	}
	reads := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" && (a.GetResource().Resource == "persistentvolumeclaims" || a.GetResource().Resource == "persistentvolumes") {
				n++
			}
		}
		return n
	}
	client.ClearActions()
	for pass := range 3 {
		for _, name := range []string{"a", "b"} {
			_, wait := k.csiAttachedVolumes(types.UID(name), pod(name))
			if !strings.Contains(wait, "csi.podsafe.io") && !strings.Contains(wait, "vol-"+name) {
				t.Errorf("pass %d, pod %s: waits %q, want a wait naming its volume", pass, name, wait)
			}
		}
	}
	if got := reads(); got != 4 {
		t.Errorf("%d reads of claims and volumes over 3 passes of 2 pods, want 4 (each pod's claim and volume once)", got)
	}
}
