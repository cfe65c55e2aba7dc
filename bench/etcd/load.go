package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchNamespace holds every created pod.
const benchNamespace = "default"

// workload is the object every system writes: a pod of about the requested
// size. value is its JSON, exactly size bytes: etcd's value and the raw
// store's data. apiPod is the pod client-go sends; podsafe's API server adds
// defaults, status and system metadata before storing it, so it is padded
// less, to be stored at about size bytes too.
type workload struct {
	value  []byte
	apiPod *corev1.Pod
	// storedSize is the size podsafe's API server stored for apiPod,
	// measured after the first round through the API.
	storedSize int
}

// apiOverhead is about what podsafe's API server adds to apiPod.
const apiOverhead = 530

func newWorkload(size int) *workload {
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   benchNamespace,
			Labels:      map[string]string{"app": "storebench", "tier": "backend", "release": "r1"},
			Annotations: map[string]string{"pad": ""},
		},
		Spec: corev1.PodSpec{
			SchedulerName: benchSchedulerName,
			// kube-apiserver's ServiceAccount admission would mount a token
			// volume into the pod, which podsafe's API server does not.
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "registry.example/storebench/main:1.0",
				Args:  []string{"--serve", "--port=8080"},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "bench"}, {Name: "LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
		},
	}
	base, _ := json.Marshal(pod)
	pod.Annotations["pad"] = strings.Repeat("x", max(0, size-len(base)))
	value, _ := json.Marshal(pod)
	api := pod.DeepCopy()
	api.Annotations["pad"] = strings.Repeat("x", max(0, size-len(base)-apiOverhead))
	return &workload{value: value, apiPod: api}
}

// podName names the n-th object of a client in a round.
func podName(prefix string, client, n int) string {
	return fmt.Sprintf("%s-%d-%d", prefix, client, n)
}

// loadResult is what one measured load produced.
type loadResult struct {
	ok, errors int64
	wall       time.Duration
	firstErrs  []string
}

// runLoad calls op from clients goroutines for d and counts the calls that
// completed within it. Client i's n-th call is op(ctx, i, n). atEnd, if not
// nil, is called when d has passed, before the calls in flight return.
func runLoad(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, client, n int) error, atEnd func()) loadResult {
	var (
		ok, errs atomic.Int64
		mu       sync.Mutex
		first    []string
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if !time.Now().Before(deadline) {
					return
				}
				err := op(ctx, i, n)
				if time.Now().After(deadline) {
					return
				}
				if err == nil {
					ok.Add(1)
					continue
				}
				errs.Add(1)
				mu.Lock()
				if len(first) < 3 {
					first = append(first, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-time.After(time.Until(deadline)):
	case <-ctx.Done():
	}
	if atEnd != nil {
		atEnd()
	}
	wg.Wait()
	return loadResult{ok: ok.Load(), errors: errs.Load(), wall: d, firstErrs: first}
}

// timedLoad runs a warm-up load, then a measured one, sampling cpu (the
// servers' CPU time so far) around the measured one.
func timedLoad(ctx context.Context, o options, cpu func() (time.Duration, error), op func(ctx context.Context, prefix string, client, n int) error) (result, error) {
	if o.warmup > 0 {
		runLoad(ctx, o.clients, o.warmup, func(ctx context.Context, c, n int) error { return op(ctx, "warm", c, n) }, nil)
	}
	before, err := cpu()
	if err != nil {
		return result{}, err
	}
	var after time.Duration
	lr := runLoad(ctx, o.clients, o.duration, func(ctx context.Context, c, n int) error { return op(ctx, "bench", c, n) },
		func() { after, err = cpu() })
	if err != nil {
		return result{}, err
	}
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	return result{writes: lr.ok, errors: lr.errors, wall: lr.wall, cpu: after - before, firstErrs: lr.firstErrs}, nil
}
