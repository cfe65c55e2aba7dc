package kubelet

import (
	"context"
	"testing"
	"time"
)

// TestPostStatusWithoutPodObject: a worker killing an orphan's containers
// (LC-13: no pod object was ever seen, or it is gone) has no status to post
// and must not try (it once panicked on the nil pod).
func TestPostStatusWithoutPodObject(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := NewSimRuntime("node-0", nil, nil)
	defer rt.Close()
	w := newPodWorker(&Kubelet{rt: rt, ctx: ctx}, "uid-1", "default", "gone", []ContainerStatus{
		{ID: "c1", Namespace: "default", Pod: "gone", UID: "uid-1", Container: "app", Running: true, StartedAt: time.Unix(100, 0)},
	})
	w.orphan = true
	w.postStatus(time.Unix(200, 0), false)
	w.postStatus(time.Unix(200, 0), true)
	w.status.mu.Lock()
	defer w.status.mu.Unlock()
	if w.status.want != nil {
		t.Errorf("a status was queued for a pod with no object: %+v", w.status.want)
	}
}
