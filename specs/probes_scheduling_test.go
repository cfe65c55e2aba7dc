package specs_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
)

// waitRunning waits until every named pod of the default namespace runs:
// a probe that binds pods directly waits so before it submits a preemptor,
// or the scheduler, whose cache learns of them through its informer, could
// still place the preemptor where they are about to be.
func waitRunning(ctx context.Context, cs kubernetes.Interface, names ...string) {
	GinkgoHelper()
	for _, name := range names {
		Eventually(func() corev1.PodPhase {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Status.Phase
		}).WithTimeout(30*time.Second).Should(Equal(corev1.PodRunning), "pod %s runs", name)
	}
}

// podStory describes pod name for a failure message: where it is bound,
// its conditions and the namespace's Events (the scheduler's reasons).
func podStory(ctx context.Context, cs kubernetes.Interface, name, what string) func() string {
	return func() string {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("%s; pod %s: %v", what, name, err)
		}
		var evs []string
		if ev, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range ev.Items {
				evs = append(evs, e.Regarding.Name+": "+e.Reason+" "+e.Note)
			}
		}
		if ev, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range ev.Items {
				evs = append(evs, e.InvolvedObject.Name+": "+e.Reason+" "+e.Message)
			}
		}
		return fmt.Sprintf("%s; pod %s on %q nominated %q, conditions %+v; events %v", what, name, p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Conditions, evs)
	}
}

var _ = Describe("conformance probes", Label("conformance"), func() {
	It("PR-13: with preemption disabled a higher-priority pod waits instead of preempting", Label("PR-13", "PR", onKube), func(ctx SpecContext) {
		cs := probeNodes(ctx, probeOpts{noPreemption: true}).cs
		for name, value := range map[string]int32{"low": 10, "high": 1000} {
			_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		big := func(name, class string) *corev1.Pod {
			p := simPod(name, nil)
			p.Spec.PriorityClassName = class
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
			return p
		}
		pods := cs.CoreV1().Pods("default")
		_, err := pods.Create(ctx, big("low", "low"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			p, err := pods.Get(ctx, "low", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Spec.NodeName
		}).WithTimeout(20 * time.Second).ShouldNot(BeEmpty())
		_, err = pods.Create(ctx, big("high", "high"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() bool {
			low, err := pods.Get(ctx, "low", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			high, err := pods.Get(ctx, "high", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return low.DeletionTimestamp == nil && high.Spec.NodeName == "" && high.Status.NominatedNodeName == ""
		}).WithTimeout(3*time.Second).Should(BeTrue(), "no victim, no nomination, the preemptor stays pending")
	})

	It("PR-6: preemption victims get their graceful termination period", Label("PR-6", "PR", onKube), func(ctx SpecContext) {
		out, h := outcome(ctx, "priority")
		expectJudgedOk(out, "GP-R", false)
		victims := 0
		for _, c := range h.API {
			if c.Identity == apiserver.IdentityScheduler && c.Verb == "delete" && c.Resource == "pods" && c.Outcome == history.StatusOK {
				victims++
				Expect(c.GracePeriodSeconds == nil || *c.GracePeriodSeconds > 0).To(BeTrue(), "victim %s/%s deleted with grace 0", c.Namespace, c.Name)
			}
		}
		Expect(victims).To(BeNumerically(">", 0), "the run preempted pods")
	})

	// The scheduler's choices among pending pods and victims, on one or two
	// nodes of 8 CPUs, with pods bound directly (nodeName) where a test
	// needs them in place.
	Describe("scheduling order and victims", func() {
		classes := func(ctx context.Context, cs kubernetes.Interface) {
			for name, value := range map[string]int32{"p10": 10, "p100": 100, "p1000": 1000} {
				_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
		}
		cpuPod := func(name, class, cpu, node string, labels map[string]string) *corev1.Pod {
			p := simPod(name, labels)
			p.Spec.PriorityClassName = class
			p.Spec.NodeName = node
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
			return p
		}
		nodeOf := func(ctx context.Context, cs kubernetes.Interface, name string) func() string {
			return func() string {
				p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return "(deleted)"
				}
				Expect(err).NotTo(HaveOccurred())
				return p.Spec.NodeName
			}
		}
		create := func(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) {
			_, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		It("PR-3: the queue is ordered by priority, and a pod that fits nowhere does not block lower ones", Label("PR-3", "PR", onKube), func(ctx SpecContext) {
			env := probeNodes(ctx, probeOpts{noPreemption: true})
			cs := env.cs
			classes(ctx, cs)
			create(ctx, cs, cpuPod("blocker", "p10", "6", "node-0", nil))
			create(ctx, cs, cpuPod("huge", "p1000", "20", "", nil))
			create(ctx, cs, cpuPod("small", "p10", "1", "", nil))
			Eventually(nodeOf(ctx, cs, "small")).WithTimeout(20*time.Second).Should(Equal("node-0"), "the pod that fits is scheduled past the one that fits nowhere")
			// With the scheduler stopped, both arrive while there is room
			// for one: when it starts, its queue pops the higher first.
			Expect(env.stopScheduler()).To(Succeed())
			Expect(cs.CoreV1().Pods("default").Delete(ctx, "blocker", metav1.DeleteOptions{})).To(Succeed())
			Eventually(nodeOf(ctx, cs, "blocker")).WithTimeout(20 * time.Second).Should(Equal("(deleted)"))
			create(ctx, cs, cpuPod("low", "p10", "5", "", nil))
			create(ctx, cs, cpuPod("high", "p1000", "5", "", nil))
			Expect(env.startScheduler()).To(Succeed())
			Eventually(nodeOf(ctx, cs, "high")).WithTimeout(20*time.Second).Should(Equal("node-0"), "the higher priority takes the room")
			Consistently(nodeOf(ctx, cs, "low")).WithTimeout(time.Second).Should(BeEmpty(), "the lower priority waits")
		})

		It("PR-11: among candidate nodes, the one whose victims have the lowest priority", Label("PR-11", "PR", onKube), func(ctx SpecContext) {
			cs := probeNodes(ctx, probeOpts{nodes: cluster.DefaultTopology(1, 2, 1).Nodes}).cs
			classes(ctx, cs)
			create(ctx, cs, cpuPod("mid", "p100", "6", "node-0", nil))
			create(ctx, cs, cpuPod("lowest", "p10", "6", "node-1", nil))
			waitRunning(ctx, cs, "mid", "lowest")
			create(ctx, cs, cpuPod("preemptor", "p1000", "6", "", nil))
			Eventually(nodeOf(ctx, cs, "preemptor")).WithTimeout(30*time.Second).Should(Equal("node-1"), podStory(ctx, cs, "preemptor", "the preemptor lands where the lowest victim was"))
			Expect(nodeOf(ctx, cs, "mid")()).To(Equal("node-0"), "the higher-priority candidate victim is spared")
		})

		It("PR-7: victims whose budget would not be violated are preferred", Label("PR-7", "PR", onKube), func(ctx SpecContext) {
			cs := probeNodes(ctx, probeOpts{nodes: cluster.DefaultTopology(1, 2, 1).Nodes, controllers: true}).cs
			classes(ctx, cs)
			create(ctx, cs, cpuPod("guarded", "p10", "6", "node-0", map[string]string{"app": "guarded"}))
			create(ctx, cs, cpuPod("free", "p10", "6", "node-1", map[string]string{"app": "free"}))
			_, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "guard"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() int32 {
				b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "guard", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				return b.Status.ExpectedPods
			}).WithTimeout(20*time.Second).Should(BeEquivalentTo(1), "the disruption controller counted the guarded pod")
			waitRunning(ctx, cs, "guarded", "free")
			create(ctx, cs, cpuPod("preemptor", "p1000", "6", "", nil))
			Eventually(nodeOf(ctx, cs, "preemptor")).WithTimeout(30*time.Second).Should(Equal("node-1"), podStory(ctx, cs, "preemptor", "the preemptor lands where the unguarded victim was"))
			Expect(nodeOf(ctx, cs, "guarded")()).To(Equal("node-0"), "the pod its budget protects is spared")
		})

		It("TS-9: pods a Service selects, with no constraints of their own, are spread by the default constraints", Label("TS-9", "TS", onKube), func(ctx SpecContext) {
			cs := probeNodes(ctx, probeOpts{nodes: cluster.DefaultTopology(1, 3, 3).Nodes}).cs
			_, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			perNode := map[string]int{}
			for i := range 6 {
				name := fmt.Sprintf("web-%d", i)
				create(ctx, cs, cpuPod(name, "", "100m", "", map[string]string{"app": "web"}))
				var node string
				Eventually(func() string { node = nodeOf(ctx, cs, name)(); return node }).WithTimeout(20 * time.Second).ShouldNot(BeEmpty())
				perNode[node]++
			}
			// Without the defaults every placement is a tie broken at
			// random: an even 2/2/2 would come one time in eight.
			Expect(perNode).To(Equal(map[string]int{"node-0": 2, "node-1": 2, "node-2": 2}))
		})
	})

	It("PR-5: a nominated preemptor lands on another node that frees up first", Label("PR-5", "PR", onKube), func(ctx SpecContext) {
		cs := probeNodes(ctx, probeOpts{nodes: cluster.DefaultTopology(1, 2, 1).Nodes}).cs
		for name, value := range map[string]int32{"p10": 10, "p100": 100, "p1000": 1000} {
			_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		pods := cs.CoreV1().Pods("default")
		pod := func(name, class, node string, grace int64, script string) *corev1.Pod {
			p := simPod(name, nil)
			p.Spec.PriorityClassName, p.Spec.NodeName = class, node
			p.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
			p.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "c": script}
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
			return p
		}
		// The victim on node-0 takes 600 scaled s (12 s wall) to go; node-1's
		// pod has a higher priority than the victim, so preemption picks
		// node-0 and nominates it.
		for _, p := range []*corev1.Pod{pod("victim", "p10", "node-0", 600, "ignore-term"), pod("other", "p100", "node-1", 1, "")} {
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		waitRunning(ctx, cs, "victim", "other")
		_, err := pods.Create(ctx, pod("preemptor", "p1000", "", 30, ""), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			p, err := pods.Get(ctx, "preemptor", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Status.NominatedNodeName
		}).WithTimeout(30*time.Second).Should(Equal("node-0"), podStory(ctx, cs, "preemptor", "preemption nominated the victim's node"))
		// node-1 frees up long before the victim is gone: the preemptor
		// may land there (PR-5), and does.
		Expect(pods.Delete(ctx, "other", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() string {
			p, err := pods.Get(ctx, "preemptor", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Spec.NodeName
		}).WithTimeout(30*time.Second).Should(Equal("node-1"), "bound to the node that freed up first")
		v, err := pods.Get(ctx, "victim", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the victim was still terminating when the preemptor was bound elsewhere")
		Expect(v.DeletionTimestamp).NotTo(BeNil())
	})

	// TS-E: the worked examples of the topology spread documentation, on the
	// real scheduler. Nodes carry the examples' own "zone" and "node" keys.
	Describe("TS-E: the worked examples", Label("TS-E", "TS", onKube), func() {
		node := func(name, zone string) cluster.NodeSpec {
			return cluster.NodeSpec{Name: name, Labels: map[string]string{"node": name, "zone": zone, cluster.LabelHostname: name}}
		}
		fooBar := map[string]string{"foo": "bar"}
		constraint := func(key string) corev1.TopologySpreadConstraint {
			return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: fooBar}}
		}
		// place puts one foo=bar pod on each named node (bound directly) and
		// then submits mypod to the scheduler; it returns mypod's node once
		// bound, or "" once the scheduler has tried and found no node
		// (PodScheduled False, Unschedulable). It waits for one or the
		// other, not for a clock: a slow machine delays the answer without
		// changing it. The bound on the wait only stops a scheduler that
		// never answers.
		place := func(ctx context.Context, nodes []cluster.NodeSpec, existing []string, mypod *corev1.Pod) string {
			pods := probeNodes(ctx, probeOpts{nodes: nodes}).cs.CoreV1().Pods("default")
			for i, n := range existing {
				p := simPod(fmt.Sprintf("existing-%d", i), fooBar)
				p.Spec.NodeName = n
				_, err := pods.Create(ctx, p, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
			_, err := pods.Create(ctx, mypod, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			bound, refused := "", false
			Eventually(ctx, func(g Gomega) {
				p, err := pods.Get(ctx, mypod.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				bound = p.Spec.NodeName
				refused = slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
					return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
				})
				g.Expect(bound != "" || refused).To(BeTrue(), "the scheduler has neither bound mypod nor found it unschedulable")
			}).WithTimeout(3 * time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
			return bound
		}
		four := []cluster.NodeSpec{node("node1", "zoneA"), node("node2", "zoneA"), node("node3", "zoneB"), node("node4", "zoneB")}

		It("one zone constraint admits only zone B", func(ctx SpecContext) {
			p := simPod("mypod", fooBar)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{constraint("zone")}
			Expect(place(ctx, four, []string{"node1", "node2", "node3"}, p)).To(BeElementOf("node3", "node4"))
		})
		It("a zone and a node constraint admit only node4", func(ctx SpecContext) {
			p := simPod("mypod", fooBar)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{constraint("zone"), constraint("node")}
			Expect(place(ctx, four, []string{"node1", "node2", "node3"}, p)).To(Equal("node4"))
		})
		It("conflicting constraints leave the pod pending", func(ctx SpecContext) {
			three := []cluster.NodeSpec{node("node1", "zoneA"), node("node2", "zoneA"), node("node3", "zoneB")}
			p := simPod("mypod", fooBar)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{constraint("zone"), constraint("node")}
			// zone A holds 3, zone B 2: only zone B; node2 holds the fewest:
			// only node2. No node is both.
			Expect(place(ctx, three, []string{"node1", "node1", "node2", "node3", "node3"}, p)).To(BeEmpty())
		})
		It("TS-3: ScheduleAnyway still schedules where the skew would break, and prefers the domain that lowers it", Label("TS-3"), func(ctx SpecContext) {
			anyway := constraint("zone")
			anyway.WhenUnsatisfiable = corev1.ScheduleAnyway
			p := simPod("mypod", fooBar)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{anyway}
			p.Spec.NodeSelector = map[string]string{"zone": "zoneA"}
			Expect(place(ctx, four, []string{"node1", "node2", "node3"}, p)).To(BeElementOf("node1", "node2"), "placed in zone A although zone A then leads by 2")
		})
		It("TS-3: ScheduleAnyway prefers the zone with fewer matching pods", Label("TS-3"), func(ctx SpecContext) {
			anyway := constraint("zone")
			anyway.WhenUnsatisfiable = corev1.ScheduleAnyway
			p := simPod("mypod", fooBar)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{anyway}
			Expect(place(ctx, four, []string{"node1", "node1", "node2", "node2", "node3"}, p)).To(BeElementOf("node3", "node4"))
		})
		It("a NotIn zone C node affinity leaves zone C out of the skew: zone B", func(ctx SpecContext) {
			five := append(append([]cluster.NodeSpec{}, four...), node("node5", "zoneC"))
			p := simPod("mypod", fooBar)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{constraint("zone")}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"zoneC"}}}}},
			}}}
			Expect(place(ctx, five, []string{"node1", "node2", "node3"}, p)).To(BeElementOf("node3", "node4"))
		})
	})
})
