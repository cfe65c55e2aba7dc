package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

func init() {
	Add("priority", func() Workload { return &Priority{} })
}

// priorityTier is one PriorityClass of the workload.
type priorityTier struct {
	tier   string // the pod label tier=<tier>
	class  string
	value  int32
	policy corev1.PreemptionPolicy
}

// priorityTiers are the workload's classes, lowest first. The last has the
// highest value but never preempts (PR-12): it waits for room.
var priorityTiers = []priorityTier{
	{tier: "low", class: "podsafe-low", value: 1000, policy: corev1.PreemptLowerPriority},
	{tier: "mid", class: "podsafe-mid", value: 2000, policy: corev1.PreemptLowerPriority},
	{tier: "high", class: "podsafe-high", value: 3000, policy: corev1.PreemptLowerPriority},
	{tier: "never", class: "podsafe-high-nopreempt", value: 3000, policy: corev1.PreemptNever},
}

// priorityBudgets are the workload's PodDisruptionBudgets: the low tier
// keeps at least one pod, the mid tier loses at most one at a time (PR-7).
var priorityBudgets = []struct {
	tier string
	spec policyv1.PodDisruptionBudgetSpec
}{
	{tier: "low", spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}},
	{tier: "mid", spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
}

// Priority is the preemption workload (PR-*): four PriorityClasses (low,
// mid, high, and a high one with preemptionPolicy Never), two
// PodDisruptionBudgets, and bare pods of random classes whose CPU requests
// oversubscribe the nodes, so that higher-priority pods must preempt. Each
// pod is deleted with a random grace once its lifetime is over.
//
// Operations: priority:create-class (key <class>) and priority:create-pdb
// (key ns/<tier>) once at the start, then priority:create-pod (key
// ns/prio-<slot>, Value class=<class> cpu=<n> grace=<n>),
// priority:get-pod, priority:list, priority:get-pdb and
// priority:delete-pod (Value grace=N|default).
type Priority struct {
	// Namespace holds the pods and budgets (default "podsafe-priority").
	Namespace string
	// Placement, when set, adjusts every pod spec to the cluster (see
	// Placer).
	Placement func(*corev1.PodSpec)
	// Pods is how many pod slots there are (default 4 per node, at least
	// 4); slot j belongs to process j mod processes.
	Pods int
	// CPUs are the CPU requests a pod draws from (default 2, 3, 4; nodes
	// have 8).
	CPUs []string
	// Lifetime is a pod's mean scaled lifetime before it is deleted
	// (default 300 s; each draws from [L/2, 3L/2)): long enough for the
	// slots to fill and the nodes to be oversubscribed.
	Lifetime time.Duration
	// TerminationGrace is the largest spec.terminationGracePeriodSeconds a
	// pod draws, from 1 (default 10).
	TerminationGrace int64
	// MaxDeleteGrace is the longest grace a deletion asks for (default 30).
	MaxDeleteGrace int64
	// Force lets deletions ask for grace 0; off by default.
	Force bool
	// Interval is the mean scaled time between two operations of the whole
	// workload (default 10 s).
	Interval time.Duration
	// OpTimeout bounds each operation in wall time (default 2 s).
	OpTimeout time.Duration
	// Weights of create, get, list and get-pdb when no pod is due for
	// deletion (default 6, 2, 1, 1).
	Weights [4]int
	// ClassWeights of low, mid, high and high-nopreempt pods (default 4,
	// 3, 2, 1).
	ClassWeights [4]int
	// Gradual lets the slots fill at the workload's pace. By default every
	// process first creates the pods of all its slots at once, so the
	// nodes are oversubscribed within the first second: pending pods then
	// find them full of pods of every class, their own included, and
	// preemption (or its refusal) starts at once.
	Gradual bool

	_ struct{}
}

// Name implements Workload.
func (w *Priority) Name() string { return "priority" }

// Describe implements Workload.
func (w *Priority) Describe() string {
	return "PriorityClasses low/mid/high/high-nopreempt, PodDisruptionBudgets, and oversubscribing pods that must preempt; deleted after a while"
}

// Needs implements Workload.
func (w *Priority) Needs() Needs {
	return Needs{Kubelets: true, Scheduler: true, Controllers: true}
}

func (w *Priority) defaults(nodes int) {
	if w.Namespace == "" {
		w.Namespace = "podsafe-priority"
	}
	if w.Pods == 0 {
		w.Pods = max(4*nodes, 4)
	}
	if len(w.CPUs) == 0 {
		w.CPUs = []string{"2", "3", "4"}
	}
	if w.Lifetime == 0 {
		w.Lifetime = 300 * time.Second
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
	if w.Weights == [4]int{} {
		w.Weights = [4]int{6, 2, 1, 1}
	}
	if w.ClassWeights == [4]int{} {
		w.ClassWeights = [4]int{4, 3, 2, 1}
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Priority) Validate() error {
	c := *w
	c.defaults(1)
	switch {
	case c.Pods < 0, c.Lifetime < 0, c.TerminationGrace < 0, c.MaxDeleteGrace < 0, c.Interval < 0, c.OpTimeout < 0:
		return fmt.Errorf("%w: priority: Pods, Lifetime, TerminationGrace, MaxDeleteGrace, Interval and OpTimeout must not be negative", ErrInvalidWorkload)
	}
	for _, cpu := range c.CPUs {
		if _, err := resource.ParseQuantity(cpu); err != nil {
			return fmt.Errorf("%w: priority: CPUs: %q is not a quantity such as 2 or 500m", ErrInvalidWorkload, cpu)
		}
	}
	if err := validWeights("priority", c.Weights[:]); err != nil {
		return err
	}
	return validWeights("priority classes", c.ClassWeights[:])
}

// Run implements Workload.
func (w *Priority) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults(len(env.Nodes))
	return runProcs(ctx, env, w.Name(), w.OpTimeout, w.setup, w.loop)
}

// setup creates the namespace, the classes and the budgets.
func (w *Priority) setup(ctx context.Context, p *proc) error {
	if err := p.ensureNamespace(ctx, w.Namespace); err != nil {
		return err
	}
	for _, t := range priorityTiers {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: t.class}, Value: t.value,
			PreemptionPolicy: ptr.To(t.policy), Description: "podsafe priority workload, tier " + t.tier}
		if err := p.ensure(ctx, "create-class", t.class, func(ctx context.Context, _ *history.Op) error {
			_, err := p.cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	for _, b := range priorityBudgets {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: b.tier, Namespace: w.Namespace}, Spec: b.spec}
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: "priority", "tier": b.tier}}
		if err := p.ensure(ctx, "create-pdb", w.Namespace+"/"+b.tier, func(ctx context.Context, _ *history.Op) error {
			_, err := p.cs.PolicyV1().PodDisruptionBudgets(w.Namespace).Create(ctx, pdb, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (w *Priority) loop(runCtx context.Context, p *proc) {
	ctx := context.WithoutCancel(runCtx)
	weights := w.Weights
	if !w.Gradual {
		// Create only, until the opening burst has filled every slot.
		weights = [4]int{1, 0, 0, 0}
	}
	pl := newSlotPlanner(p.rng, w.Pods, p.worker, p.workers, w.Lifetime, w.MaxDeleteGrace, w.Force, weights)
	step := func() {
		a := pl.next(p.clock.Now())
		runSlot(ctx, p, pl, w.Namespace, "prio-", p.clock.Now, a,
			func(slot int, variant uint64) error {
				pod, value := w.pod(slot, variant)
				return createPod(ctx, p, pod, value)
			},
			func(variant uint64) error { return w.getBudget(ctx, p, variant) })
	}
	if !w.Gradual {
		for range pl.owned {
			if runCtx.Err() != nil {
				return
			}
			step()
		}
		pl.weights = w.Weights
	}
	for p.think(runCtx, w.Interval) {
		step()
	}
}

// getBudget reads one of the budgets, chosen by variant.
func (w *Priority) getBudget(ctx context.Context, p *proc, variant uint64) error {
	name := priorityBudgets[variant%uint64(len(priorityBudgets))].tier
	return p.call(ctx, "get-pdb", w.Namespace+"/"+name, "", func(ctx context.Context, op *history.Op) error {
		pdb, err := p.cs.PolicyV1().PodDisruptionBudgets(w.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			op.Found = true
			op.Output = fmt.Sprintf("healthy=%d desired=%d allowed=%d expected=%d", pdb.Status.CurrentHealthy,
				pdb.Status.DesiredHealthy, pdb.Status.DisruptionsAllowed, pdb.Status.ExpectedPods)
		}
		return err
	})
}

// pod builds the pod of slot from variant and says what it is for the op's
// Value. It is pure.
func (w *Priority) pod(slot int, variant uint64) (*corev1.Pod, string) {
	rng := rand.New(rand.NewPCG(variant, uint64(slot)))
	t := priorityTiers[pickWeighted(rng, w.ClassWeights[:])]
	cpu := w.CPUs[rng.IntN(len(w.CPUs))]
	grace := 1 + rng.Int64N(w.TerminationGrace)
	ann := map[string]string{}
	if rng.IntN(3) == 0 {
		setScript(ann, "app", "prestop=2s")
	}
	c := simContainer("app")
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prio-" + strconv.Itoa(slot), Namespace: w.Namespace,
			Labels: map[string]string{labelApp: "priority", "tier": t.tier}, Annotations: ann},
		Spec: corev1.PodSpec{
			PriorityClassName:             t.class,
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers:                    []corev1.Container{c},
		},
	}
	place(w.Placement, &pod.Spec)
	return pod, fmt.Sprintf("class=%s cpu=%s grace=%d", t.class, cpu, grace)
}
