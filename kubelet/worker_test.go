package kubelet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startRecorder is a runtime that records the containers it is asked to
// start and starts none.
type startRecorder struct {
	*stuckRuntime
	started []string
}

func (r *startRecorder) Start(_ context.Context, cfg ContainerConfig) (ContainerID, error) {
	r.started = append(r.started, cfg.Container.Name)
	return "", errors.New("startRecorder starts nothing")
}

// TestInitContainersStartInTurn: init containers start one at a time, a
// succeeded one is passed over (even within its back-off), and a failed one
// is restarted only once its back-off has expired, the worker asking to be
// woken then (LC-10).
func TestInitContainersStartInTurn(t *testing.T) {
	rt := &startRecorder{stuckRuntime: newStuckRuntime()}
	k, clk := newEvictionKubelet(t, rt, func(*Config) {})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Spec: corev1.PodSpec{NodeName: "node-0", RestartPolicy: corev1.RestartPolicyAlways,
			InitContainers: []corev1.Container{{Name: "i1"}, {Name: "i2"}},
			Containers:     []corev1.Container{{Name: "app"}}}}
	w := newPodWorker(k, pod.UID, pod.Namespace, pod.Name, nil)
	w.pod = pod
	ctx := context.Background()
	now := clk.Now()
	w.ensureStates(now)
	exited := func(name string, code int) {
		s := w.ctrs[name]
		s.last, s.notAfter = &ContainerStatus{Container: name, Init: true, ExitCode: code}, now.Add(10*time.Second)
	}
	step := func(want []string, wantNext time.Time) {
		t.Helper()
		next := w.startContainers(ctx, now)
		if diff := cmp.Diff(want, rt.started); diff != "" || !next.Equal(wantNext) {
			t.Errorf("at %v: started (-want +got):\n%s\nnext look %v, want %v", now.Sub(evictionTestStart), diff, next, wantNext)
		}
	}
	step([]string{"i1"}, time.Time{})
	exited("i1", 0)
	step([]string{"i1", "i2"}, time.Time{})
	exited("i2", 1)
	step([]string{"i1", "i2"}, now.Add(10*time.Second))
	if msg := w.ctrs["i2"].waitMsg; msg != "back-off restarting failed init container" {
		t.Errorf("i2 waits with %q, want its back-off", msg)
	}
	now = now.Add(10 * time.Second)
	step([]string{"i1", "i2", "i2"}, time.Time{})
}
