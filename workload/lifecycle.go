package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func init() {
	Add("lifecycle", func() Workload { return &Lifecycle{} })
}

// ReadinessGate is the readiness gate condition type of the lifecycle
// workload's gated pods. Nothing sets it (the workload identity may not
// write pod status), so those pods never become Ready (LC-8).
const ReadinessGate corev1.PodConditionType = "podsafe.io/gate"

// lifecycleVariant is one kind of pod of the lifecycle workload: what its
// containers do and which guarantees it exercises.
type lifecycleVariant struct {
	name string
	// build fills the pod's spec and script annotations; rng draws the
	// variant's own choices.
	build func(pod *corev1.Pod, rng *rand.Rand)
}

// lifecycleVariants is the catalog of lifecycle pods.
var lifecycleVariants = []lifecycleVariant{
	// LC-2: runs to completion.
	{"complete", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyNever, "run=2s exit=0")
	}},
	{"complete-onfailure", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyOnFailure, "run=3s exit=0")
	}},
	{"fail-never", func(p *corev1.Pod, rng *rand.Rand) {
		appPod(p, corev1.RestartPolicyNever, fmt.Sprintf("run=1s exit=%d", 1+rng.IntN(3)))
	}},
	// LC-6: restarts with back-off on the same node.
	{"fail-onfailure", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyOnFailure, "run=2s exit=1")
	}},
	{"crash-always", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "crash-loop")
	}},
	{"exit0-always", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "run=3s exit=0")
	}},
	// LC-10: init containers one after another, then the app.
	{"init", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "")
		p.Spec.InitContainers = []corev1.Container{simContainer("init-a"), simContainer("init-b")}
		setScript(p.Annotations, "init-a", "run=1s")
		setScript(p.Annotations, "init-b", "run=2s")
	}},
	// A failing init container: the pod fails under Never; under
	// OnFailure and Always the init container restarts with back-off and
	// the app never starts (LC-6, LC-10).
	{"init-fail", func(p *corev1.Pod, rng *rand.Rand) {
		policy := []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways}[rng.IntN(3)]
		appPod(p, policy, "")
		p.Spec.InitContainers = []corev1.Container{simContainer("init")}
		setScript(p.Annotations, "init", "run=1s exit=1")
	}},
	// LC-9, GP-1: startup holds the others off, readiness waits out its
	// initial delay (the script would answer Success from 2 s), then a
	// liveness failure kills with the probe's own grace.
	{"probes", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "startup-after=3s ready-after=2s liveness-fail-at=20s")
		c := &p.Spec.Containers[0]
		c.StartupProbe = execProbe(1, 10)
		c.ReadinessProbe = execProbe(1, 1)
		c.ReadinessProbe.InitialDelaySeconds = 5
		c.LivenessProbe = execProbe(2, 2)
		c.LivenessProbe.TerminationGracePeriodSeconds = ptr.To(int64(2))
	}},
	{"startup-fail", func(p *corev1.Pod, rng *rand.Rand) {
		policy := corev1.RestartPolicyAlways
		if rng.IntN(2) == 0 {
			policy = corev1.RestartPolicyOnFailure
		}
		appPod(p, policy, "startup-after=1h")
		p.Spec.Containers[0].StartupProbe = execProbe(1, 3)
	}},
	{"unready", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "ready-after=2s unready-at=10s")
		p.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
		p.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 3
	}},
	// LC-8: a gate nobody sets.
	{"readiness-gate", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "")
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: ReadinessGate}}
	}},
	// LC-11, GP-2, GP-3: termination that takes its time.
	{"prestop-hang", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "prestop=hang")
		p.Spec.Containers[0].Lifecycle = preStopHook()
	}},
	{"ignore-term", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "ignore-term")
	}},
	{"slow-term", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyAlways, "prestop=2s stop-after-term=4s")
		p.Spec.Containers[0].Lifecycle = preStopHook()
	}},
	// Two containers: one finishes, the other runs on.
	{"sidecar", func(p *corev1.Pod, _ *rand.Rand) {
		appPod(p, corev1.RestartPolicyNever, "run=5s exit=0")
		p.Spec.Containers = append(p.Spec.Containers, simContainer("side"))
		setScript(p.Annotations, "side", "stop-after-term=1s")
	}},
}

// appPod gives p one container "app" with script and restart policy.
func appPod(p *corev1.Pod, policy corev1.RestartPolicy, script string) {
	p.Spec.RestartPolicy = policy
	p.Spec.Containers = []corev1.Container{simContainer("app")}
	setScript(p.Annotations, "app", script)
}

// execProbe is a probe the simulated runtime answers from the script.
func execProbe(period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: period, FailureThreshold: failures,
	}
}

// preStopHook is a spec preStop hook; the script says how long it takes.
func preStopHook() *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
}

// Lifecycle is the pod lifecycle workload (LC-*, GP-*): bare pods of
// scripted containers drawn from a catalog — runs to completion and
// failures under every restart policy, init containers, startup, liveness
// and readiness probes, readiness gates, hanging preStop hooks, containers
// that ignore TERM — each deleted with a random grace once its lifetime is
// over.
//
// Operations: lifecycle:create-pod (key ns/lc-<slot>, Value
// variant=<name> restart=<policy> grace=<n>), lifecycle:get-pod,
// lifecycle:list, lifecycle:delete-pod (Value grace=N|default), and
// lifecycle:create-namespace once at the start.
type Lifecycle struct {
	// Namespace holds the pods (default "podsafe-lifecycle").
	Namespace string
	// Placement, when set, adjusts every pod spec to the cluster (see
	// Placer).
	Placement func(*corev1.PodSpec)
	// Pods is how many pod slots there are (default 8); slot j belongs to
	// process j mod processes.
	Pods int
	// Lifetime is a pod's mean scaled lifetime (default 120 s; each draws
	// from [L/2, 3L/2)), long enough to see back-off and probe kills.
	Lifetime time.Duration
	// TerminationGrace is the largest spec.terminationGracePeriodSeconds a
	// pod draws, from 1 (default 10).
	TerminationGrace int64
	// MaxDeleteGrace is the longest grace a deletion asks for (default 30).
	MaxDeleteGrace int64
	// Force lets deletions ask for grace 0; off by default.
	Force bool
	// Variants restricts the catalog to these names (default: all; see
	// LifecycleVariants).
	Variants []string
	// Interval is the mean scaled time between two operations of the whole
	// workload (default 10 s).
	Interval time.Duration
	// OpTimeout bounds each operation in wall time (default 2 s).
	OpTimeout time.Duration
	// Weights of create, get and list when no pod is due for deletion
	// (default 3, 2, 1).
	Weights [3]int

	_ struct{}
}

// LifecycleVariants names the lifecycle workload's kinds of pod.
func LifecycleVariants() []string {
	out := make([]string, len(lifecycleVariants))
	for i, v := range lifecycleVariants {
		out[i] = v.name
	}
	return out
}

// Name implements Workload.
func (w *Lifecycle) Name() string { return "lifecycle" }

// Describe implements Workload.
func (w *Lifecycle) Describe() string {
	return "bare pods of scripted containers: exits under each restart policy, init containers, probes, readiness gates, hanging preStop, ignored TERM; deleted with random grace"
}

// Needs implements Workload.
func (w *Lifecycle) Needs() Needs { return Needs{Kubelets: true, Scheduler: true} }

func (w *Lifecycle) defaults() {
	if w.Namespace == "" {
		w.Namespace = "podsafe-lifecycle"
	}
	if w.Pods == 0 {
		w.Pods = 8
	}
	if w.Lifetime == 0 {
		w.Lifetime = 120 * time.Second
	}
	if w.TerminationGrace == 0 {
		w.TerminationGrace = 10
	}
	if w.MaxDeleteGrace == 0 {
		w.MaxDeleteGrace = defaultMaxDeleteGrace
	}
	if w.Interval == 0 {
		w.Interval = defaultInterval
	}
	if w.OpTimeout == 0 {
		w.OpTimeout = defaultOpTimeout
	}
	if w.Weights == [3]int{} {
		w.Weights = [3]int{3, 2, 1}
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Lifecycle) Validate() error {
	c := *w
	c.defaults()
	switch {
	case c.Pods < 0, c.Lifetime < 0, c.TerminationGrace < 0, c.MaxDeleteGrace < 0, c.Interval < 0, c.OpTimeout < 0:
		return fmt.Errorf("%w: lifecycle: Pods, Lifetime, TerminationGrace, MaxDeleteGrace, Interval and OpTimeout must not be negative", ErrInvalidWorkload)
	}
	if _, err := c.catalog(); err != nil {
		return err
	}
	return validWeights("lifecycle", c.Weights[:])
}

// catalog is the variants in use.
func (w *Lifecycle) catalog() ([]lifecycleVariant, error) {
	if len(w.Variants) == 0 {
		return lifecycleVariants, nil
	}
	var out []lifecycleVariant
	for _, name := range w.Variants {
		found := false
		for _, v := range lifecycleVariants {
			if v.name == name {
				out, found = append(out, v), true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: lifecycle: unknown variant %q; choose from %v", ErrInvalidWorkload, name, LifecycleVariants())
		}
	}
	return out, nil
}

// Run implements Workload.
func (w *Lifecycle) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	variants, _ := w.catalog()
	return runProcs(ctx, env, w.Name(), w.OpTimeout,
		func(ctx context.Context, p *proc) error { return p.ensureNamespace(ctx, w.Namespace) },
		func(runCtx context.Context, p *proc) {
			ctx := context.WithoutCancel(runCtx)
			weights := [4]int{w.Weights[0], w.Weights[1], w.Weights[2], 0}
			pl := newSlotPlanner(p.rng, w.Pods, p.worker, p.workers, w.Lifetime, w.MaxDeleteGrace, w.Force, weights)
			for p.think(runCtx, w.Interval) {
				runSlot(ctx, p, pl, w.Namespace, "lc-", p.clock.Now, pl.next(p.clock.Now()),
					func(slot int, variant uint64) error {
						pod, value := w.pod(variants, slot, variant)
						return createPod(ctx, p, pod, value)
					}, nil)
			}
		})
}

// pod builds the pod of slot from variant and says what it is for the op's
// Value. It is pure.
func (w *Lifecycle) pod(variants []lifecycleVariant, slot int, variant uint64) (*corev1.Pod, string) {
	rng := rand.New(rand.NewPCG(variant, uint64(slot)))
	v := variants[rng.IntN(len(variants))]
	grace := 1 + rng.Int64N(w.TerminationGrace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lc-" + strconv.Itoa(slot), Namespace: w.Namespace,
			Labels:      map[string]string{labelApp: "lifecycle", "variant": v.name},
			Annotations: map[string]string{}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(grace)},
	}
	v.build(pod, rng)
	place(w.Placement, &pod.Spec)
	return pod, fmt.Sprintf("variant=%s restart=%s grace=%d", v.name, pod.Spec.RestartPolicy, grace)
}
