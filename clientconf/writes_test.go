package clientconf

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// simTemplate is a pod template of one simulated container that ends
// quickly when asked to.
func simTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{{Name: "app", Image: "sim"}},
		},
	}
}

// writer drives creates, updates and deletes of bare pods and scales a
// ReplicaSet and a StatefulSet, from one seeded random source, through its
// own client (host client-writer, dialling member 1 first). Requests that
// fail or time out are counted and not retried: the test judges the end
// state against the server, not against what the writer meant.
type writer struct {
	cs  kubernetes.Interface
	rng *rand.Rand

	mu     sync.Mutex
	counts map[string]int // op -> ok; op+" failed" -> failures
	errs   []string       // the server's 5xx answers other than 503 and 504: bugs
	bare   []string       // names of bare pods the writer believes exist
	next   int
}

func newWriter(cs kubernetes.Interface, seed uint64) *writer {
	return &writer{cs: cs, rng: rand.New(rand.NewPCG(seed, 18)), counts: map[string]int{}}
}

// setUp creates the ReplicaSet and the StatefulSet the writer scales.
func (w *writer) setUp(ctx context.Context) error {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: testNamespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs"}},
			Template: simTemplate("rs"),
		},
	}
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ss", Namespace: testNamespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "ss",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ss"}},
			Template: simTemplate("ss"),
		},
	}
	if err := retry(ctx, func(ctx context.Context) error {
		_, err := w.cs.AppsV1().ReplicaSets(testNamespace).Create(ctx, rs, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating ReplicaSet rs: %w", err)
	}
	if err := retry(ctx, func(ctx context.Context) error {
		_, err := w.cs.AppsV1().StatefulSets(testNamespace).Create(ctx, ss, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating StatefulSet ss: %w", err)
	}
	return nil
}

// run writes until ctx ends, one operation every 100 ms.
func (w *writer) run(ctx context.Context) {
	for ctx.Err() == nil {
		op, err := w.step(ctx)
		w.mu.Lock()
		if err != nil {
			w.counts[op+" failed"]++
			if serverBug(err) {
				w.errs = append(w.errs, fmt.Sprintf("%s: %v", op, err))
			}
		} else {
			w.counts[op]++
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *writer) step(ctx context.Context) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w.mu.Lock()
	r := w.rng.IntN(100)
	var name string
	if len(w.bare) > 0 {
		name = w.bare[w.rng.IntN(len(w.bare))]
	}
	scale := int32(w.rng.IntN(4))
	live := len(w.bare)
	w.mu.Unlock()
	switch {
	case r < 35 && live < 12 || name == "":
		w.mu.Lock()
		w.next++
		name = fmt.Sprintf("bare-%03d", w.next)
		w.bare = append(w.bare, name)
		w.mu.Unlock()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, Spec: simTemplate("bare").Spec}
		p.Labels = map[string]string{"app": "bare"}
		_, err := w.cs.CoreV1().Pods(testNamespace).Create(rctx, p, metav1.CreateOptions{})
		return "create pod", err
	case r < 60:
		patch := fmt.Sprintf(`{"metadata":{"labels":{"touched":"%d"}}}`, r)
		_, err := w.cs.CoreV1().Pods(testNamespace).Patch(rctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		return "update pod", ignoreNotFound(err)
	case r < 80:
		w.mu.Lock()
		w.bare = slices.DeleteFunc(w.bare, func(n string) bool { return n == name })
		w.mu.Unlock()
		err := w.cs.CoreV1().Pods(testNamespace).Delete(rctx, name, metav1.DeleteOptions{})
		return "delete pod", ignoreNotFound(err)
	case r < 90:
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, scale+1)
		_, err := w.cs.AppsV1().ReplicaSets(testNamespace).Patch(rctx, "rs", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		return "scale replicaset", err
	default:
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, scale)
		_, err := w.cs.AppsV1().StatefulSets(testNamespace).Patch(rctx, "ss", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		return "scale statefulset", err
	}
}

// serverBug reports an answer no fault excuses: a 5xx other than 503
// (unavailable, as a member without a quorum may say) and 504 (timeout).
func serverBug(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false // no answer: an unknown outcome
	}
	code := st.Status().Code
	return code >= 500 && code != 503 && code != 504
}

// bugs returns the answers serverBug flagged.
func (w *writer) bugs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.errs)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// summary reports the writer's counts, sorted by operation.
func (w *writer) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ops []string
	for op := range w.counts {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	s := ""
	for _, op := range ops {
		s += fmt.Sprintf("%s %d; ", op, w.counts[op])
	}
	return s
}

// okWrites is how many writes the server acknowledged.
func (w *writer) okWrites() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for op, c := range w.counts {
		if !strings.HasSuffix(op, " failed") {
			n += c
		}
	}
	return n
}
