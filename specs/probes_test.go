package specs_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// Probes of guarantees that no history checker judges: each starts a small
// in-process cluster and asks the real API server, scheduler or kubelet.

// probeCluster starts a one-member cluster with cfg's components and returns
// it with an admin client; it is closed when the spec ends.
func probeCluster(ctx context.Context, cfg cluster.Config) (*cluster.Cluster, kubernetes.Interface) {
	if cfg.Topology.Members == 0 {
		cfg.Topology.Members = 1
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 50
	}
	c, err := cluster.New(cfg)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	Expect(c.Start(startCtx)).To(Succeed())
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{})
	Expect(err).NotTo(HaveOccurred())
	return c, cs
}

// onKube labels the probes that ask only the API server, so they run on
// the kube target too (PODSAFE_TARGET=kube): there they probe a real
// kube-apiserver, started for the probe.
const onKube = "on-kube"

// probeNode is the node the API probes bind pods to; no kubelet runs there.
const probeNode = "node-0"

// probeAPI returns an admin client of an API server to probe on the
// suite's target: podsafe's own (a one-member in-process cluster with node
// probeNode and no kubelet), or on the kube target a real control plane of
// one etcd member and one kube-apiserver with its scheduler and
// controller-manager, and no node. Either is stopped when the spec ends.
func probeAPI(ctx context.Context) kubernetes.Interface {
	if conformanceTarget != specs.TargetKube {
		_, cs := probeCluster(ctx, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1)})
		return cs
	}
	_, cs := startProbeKube(ctx, nil)
	return cs
}

// probeNodeAPI is probeAPI with one node, probeNode, run by podsafe's
// kubelet, whose runtime writes to ledger: on the embedded target an
// in-process cluster at time scale 50, on the kube target a real control
// plane with podsafe's kubelet as its node, at time scale 1.
func probeNodeAPI(ctx context.Context, ledger kubelet.Ledger) kubernetes.Interface {
	topo := cluster.DefaultTopology(1, 1, 1)
	if conformanceTarget != specs.TargetKube {
		_, cs := probeCluster(ctx, cluster.Config{Topology: topo, Kubelets: true, Ledger: ledger})
		return cs
	}
	c, cs := startProbeKube(ctx, []string{probeNode})
	n := topo.Nodes[0]
	Expect(c.StartKubelets(ctx, []kube.NodeSpec{{Name: n.Name, Labels: n.Labels, Taints: n.Taints}}, kube.KubeletOptions{Ledger: ledger})).To(Succeed())
	return cs
}

// startProbeKube starts a real control plane of one etcd member and one
// kube-apiserver with its scheduler and controller-manager, with tokens for
// nodes, stopped when the spec ends, and returns it with an admin client
// once the default ServiceAccount exists. tune, when set, adjusts the
// control plane's configuration first.
func startProbeKube(ctx context.Context, nodes []string, tune ...func(*kube.Config)) (*kube.Cluster, kubernetes.Interface) {
	bins, err := binaries.Cached(binaries.Options{})
	Expect(err).NotTo(HaveOccurred())
	cfg := kube.Config{Dir: GinkgoT().TempDir(), Binaries: bins, Etcd: 1, Network: kube.NetworkLoopback}
	for _, t := range tune {
		t(&cfg)
	}
	c, err := kube.New(cfg)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	Expect(c.Start(startCtx, nodes)).To(Succeed())
	rc, err := c.RESTConfig(kube.AdminUser, "", 0)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(rc)
	Expect(err).NotTo(HaveOccurred())
	// kube-apiserver's ServiceAccount admission refuses pods until the
	// controller-manager made the namespace's default ServiceAccount, as the
	// e2e framework waits for it too.
	Eventually(ctx, func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}).Should(Succeed(), "the default ServiceAccount")
	return c, cs
}

// probeOpts shape the cluster probeNodes starts.
type probeOpts struct {
	// nodes are the cluster's nodes, each run by podsafe's kubelet (default:
	// DefaultTopology(1, 1, 1)'s one node). Every node has 8 CPUs.
	nodes []cluster.NodeSpec
	// noPreemption disables the scheduler's preemption (PR-13).
	noPreemption bool
	// controllers runs podsafe's controllers on the embedded target;
	// kube-controller-manager always runs on the kube target.
	controllers bool
	// ledger receives what the nodes' runtimes ran.
	ledger kubelet.Ledger
	// kubelet tunes the kubelets (eviction).
	kubelet cluster.KubeletOptions
	// controller tunes podsafe's controllers; its TerminatedPodThreshold is
	// kube-controller-manager's --terminated-pod-gc-threshold on kube.
	controller cluster.ControllerOptions
	// timeScale is the embedded cluster's time scale (default 50); the
	// kube target runs at 1.
	timeScale float64
}

// probeEnv is a running probe cluster with its scheduler.
type probeEnv struct {
	cs kubernetes.Interface
	// stopScheduler crashes the scheduler; startScheduler starts it again.
	stopScheduler, startScheduler func() error
	// stopKubelet crashes a node's kubelet (its containers run on).
	stopKubelet func(node string) error
	// kube is set on the kube target.
	kube *kube.Cluster
}

// probeNodes starts a cluster with a scheduler and nodes run by podsafe's
// kubelets on the suite's target: an in-process cluster, or on the kube
// target a real control plane (one etcd member, one kube-apiserver,
// kube-scheduler and kube-controller-manager) with podsafe's kubelets as its
// nodes, at time scale 1. It is stopped when the spec ends.
func probeNodes(ctx context.Context, o probeOpts) probeEnv {
	if len(o.nodes) == 0 {
		o.nodes = cluster.DefaultTopology(1, 1, 1).Nodes
	}
	if conformanceTarget != specs.TargetKube {
		c, cs := probeCluster(ctx, cluster.Config{Topology: cluster.Topology{Members: 1, Nodes: o.nodes}, Kubelets: true, Scheduler: true,
			DisablePreemption: o.noPreemption, Controllers: o.controllers, Ledger: o.ledger, Kubelet: o.kubelet, Controller: o.controller, TimeScale: o.timeScale})
		return probeEnv{cs: cs, stopScheduler: c.StopScheduler, startScheduler: c.StartScheduler, stopKubelet: c.StopKubelet}
	}
	var names []string
	nodes := make([]kube.NodeSpec, 0, len(o.nodes))
	for _, n := range o.nodes {
		names = append(names, n.Name)
		nodes = append(nodes, kube.NodeSpec{Name: n.Name, Labels: n.Labels, Taints: n.Taints})
	}
	c, cs := startProbeKube(ctx, names, func(cfg *kube.Config) {
		cfg.DisablePreemption = o.noPreemption
		cfg.Timings.TerminatedPodGCThreshold = o.controller.TerminatedPodThreshold
	})
	Expect(c.StartKubelets(ctx, nodes, kube.KubeletOptions{Ledger: o.ledger, Tuning: o.kubelet})).To(Succeed())
	// A node is Ready before kube-controller-manager's node lifecycle
	// controller has seen it so: until then it carries the
	// node.kubernetes.io/not-ready NoSchedule taint, and kube-scheduler
	// places (and preempts) around it. The probes start on untainted nodes.
	Eventually(func() []string {
		var tainted []string
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, n := range l.Items {
			for _, t := range n.Spec.Taints {
				if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
					tainted = append(tainted, n.Name+" "+t.ToString())
				}
			}
		}
		return tainted
	}).WithTimeout(time.Minute).Should(BeEmpty(), "the node lifecycle controller lifts its taints of the new nodes")
	const scheduler = "kube-scheduler-0"
	return probeEnv{cs: cs, kube: c, stopKubelet: c.StopKubelet,
		stopScheduler:  func() error { return c.Kill(context.WithoutCancel(ctx), scheduler) },
		startScheduler: func() error { return c.Restart(context.WithoutCancel(ctx), scheduler) },
	}
}

// onKubeTarget reports whether the suite runs on the kube target.
func onKubeTarget() bool { return conformanceTarget == specs.TargetKube }

func simPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "sim"}}},
	}
}

func expectInvalid(err error, field string) {
	GinkgoHelper()
	expectRefused(err, field)
}

// expectRefused asserts a refusal whose message says why: it names one of
// reasons (a field, or the fact that makes the request wrong).
func expectRefused(err error, reasons ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API accepted what it must refuse (%v)", reasons)
	Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err)).To(BeTrue(), "error %v is not a refusal", err)
	Expect(reasons).To(ContainElement(BeElementOf(reasonsIn(err.Error(), reasons))), "the error names the field or the reason: %v", err)
}

// reasonsIn keeps the reasons msg contains.
func reasonsIn(msg string, reasons []string) []string {
	var out []string
	for _, r := range reasons {
		if strings.Contains(msg, r) {
			out = append(out, r)
		}
	}
	return out
}

var _ = Describe("conformance probes", Label("conformance"), func() {
	It("PR-1: user priority classes stay at or below 1,000,000,000 and at most one is the global default", Label("PR-1", "PR", onKube), func(ctx SpecContext) {
		cs := probeAPI(ctx)
		pcs := cs.SchedulingV1().PriorityClasses()
		_, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "too-high"}, Value: 1_000_000_001}, metav1.CreateOptions{})
		expectInvalid(err, "value")
		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "top"}, Value: 1_000_000_000}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-a"}, Value: 10, GlobalDefault: true}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-b"}, Value: 20, GlobalDefault: true}, metav1.CreateOptions{})
		// podsafe names the field; kube-apiserver's priority admission says
		// which class is the default already ("PriorityClass default-a is
		// already marked as default. Only one default can exist").
		expectRefused(err, "globalDefault", "already marked as default")
	})

	It("PR-2: admission resolves priority classes; unknown classes are refused; later changes leave existing pods alone", Label("PR-2", "PR", onKube), func(ctx SpecContext) {
		cs := probeAPI(ctx)
		pcs, pods := cs.SchedulingV1().PriorityClasses(), cs.CoreV1().Pods("default")

		p, err := pods.Create(ctx, simPod("no-class", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ptr.Deref(p.Spec.Priority, -1)).To(BeEquivalentTo(0), "no class and no global default: priority 0")

		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		withClass := simPod("high", nil)
		withClass.Spec.PriorityClassName = "high"
		p, err = pods.Create(ctx, withClass, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ptr.Deref(p.Spec.Priority, -1)).To(BeEquivalentTo(1000))

		unknown := simPod("unknown", nil)
		unknown.Spec.PriorityClassName = "no-such-class"
		_, err = pods.Create(ctx, unknown, metav1.CreateOptions{})
		Expect(err).To(HaveOccurred(), "a pod naming an unknown class is refused")
		Expect(err.Error()).To(ContainSubstring("no-such-class"))

		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Value: 7, GlobalDefault: true}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		p, err = pods.Create(ctx, simPod("defaulted", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ptr.Deref(p.Spec.Priority, -1)).To(BeEquivalentTo(7), "no class name: the global default's value")
		old, err := pods.Get(ctx, "no-class", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ptr.Deref(old.Spec.Priority, -1)).To(BeEquivalentTo(0), "a new global default leaves existing pods alone")

		Expect(pcs.Delete(ctx, "high", metav1.DeleteOptions{})).To(Succeed())
		kept, err := pods.Get(ctx, "high", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ptr.Deref(kept.Spec.Priority, -1)).To(BeEquivalentTo(1000), "deleting a class leaves its pods alone")
		again := simPod("high-again", nil)
		again.Spec.PriorityClassName = "high"
		_, err = pods.Create(ctx, again, metav1.CreateOptions{})
		Expect(err).To(HaveOccurred(), "a deleted class cannot be used by new pods")
	})

	It("TS-1: invalid topology spread constraints are refused, naming the field", Label("TS-1", "TS", onKube), func(ctx SpecContext) {
		cs := probeAPI(ctx)
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		cases := []struct {
			field string
			c     corev1.TopologySpreadConstraint
		}{
			{"maxSkew", corev1.TopologySpreadConstraint{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}},
			{"minDomains", corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel, MinDomains: ptr.To[int32](2)}},
			{"minDomains", corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel, MinDomains: ptr.To[int32](0)}},
			{"topologyKey", corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}},
			{"whenUnsatisfiable", corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "Sometimes", LabelSelector: sel}},
			{"matchLabelKeys", corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel, MatchLabelKeys: []string{"app"}}},
			{"nodeAffinityPolicy", corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel, NodeAffinityPolicy: ptr.To(corev1.NodeInclusionPolicy("Sometimes"))}},
		}
		for i, tc := range cases {
			p := simPod(fmt.Sprintf("bad-%d", i), map[string]string{"app": "x"})
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{tc.c}
			_, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			expectInvalid(err, tc.field)
		}
		ok := simPod("good", map[string]string{"app": "x"})
		ok.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel, MinDomains: ptr.To[int32](2), MatchLabelKeys: []string{"pod-template-hash"}}}
		_, err := cs.CoreV1().Pods("default").Create(ctx, ok, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "a valid constraint is accepted")
	})

	It("GP-6: the API server's graceful delete takes the request's grace, else the pod's; unscheduled or finished pods go at once; negative becomes 1", Label("GP-6", "GP", onKube), func(ctx SpecContext) {
		cs := probeAPI(ctx)
		pods := cs.CoreV1().Pods("default")
		bound := func(name string, grace *int64) {
			p := simPod(name, nil)
			p.Spec.NodeName = probeNode
			p.Spec.TerminationGracePeriodSeconds = grace
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		graceOf := func(name string) int64 {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "%s is terminating, not gone (no kubelet runs)", name)
			Expect(p.DeletionTimestamp).NotTo(BeNil())
			return ptr.Deref(p.DeletionGracePeriodSeconds, -1)
		}
		bound("spec-45", ptr.To[int64](45))
		Expect(pods.Delete(ctx, "spec-45", metav1.DeleteOptions{})).To(Succeed())
		Expect(graceOf("spec-45")).To(BeEquivalentTo(45), "no grace asked: the pod's own")

		bound("default-30", nil)
		Expect(pods.Delete(ctx, "default-30", metav1.DeleteOptions{})).To(Succeed())
		Expect(graceOf("default-30")).To(BeEquivalentTo(30), "neither: 30 s")

		bound("asked-7", ptr.To[int64](45))
		Expect(pods.Delete(ctx, "asked-7", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](7)})).To(Succeed())
		Expect(graceOf("asked-7")).To(BeEquivalentTo(7), "the request's grace wins")

		bound("negative", ptr.To[int64](45))
		Expect(pods.Delete(ctx, "negative", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](-5)})).To(Succeed())
		Expect(graceOf("negative")).To(BeEquivalentTo(1), "a negative grace becomes 1")

		_, err := pods.Create(ctx, simPod("unscheduled", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Delete(ctx, "unscheduled", metav1.DeleteOptions{})).To(Succeed())
		_, err = pods.Get(ctx, "unscheduled", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an unscheduled pod is deleted at once: %v", err)

		bound("finished", ptr.To[int64](45))
		p, err := pods.Get(ctx, "finished", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		p.Status.Phase = corev1.PodSucceeded
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Delete(ctx, "finished", metav1.DeleteOptions{})).To(Succeed())
		_, err = pods.Get(ctx, "finished", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a finished pod is deleted at once: %v", err)
	})

	It("PS-16: a force deletion from the user interface warns and needs confirmation", Label("PS-16", "PS", onKube), func(ctx SpecContext) {
		cs := probeAPI(ctx)
		p := simPod("web", nil)
		p.Spec.NodeName = probeNode
		_, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var warn bytes.Buffer
		err = specs.DeletePod(ctx, cs, "default", "web", specs.DeletePodOptions{Force: true}, &warn)
		Expect(err).To(MatchError(specs.ErrNeedsConfirmation))
		Expect(warn.String()).To(ContainSubstring("processes may keep running"))
		_, err = cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "an unconfirmed force deletion deletes nothing")
		Expect(specs.DeletePod(ctx, cs, "default", "web", specs.DeletePodOptions{Force: true, Confirmed: true}, &warn)).To(Succeed())
		_, err = cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a confirmed force deletion removes the pod at once: %v", err)
	})

	It("LC-13, PS-6: a force deletion removes the object at once, the name is free at once, and the old processes may still run", Label("LC-13", "PS-6", "LC", "PS", onKube), func(ctx SpecContext) {
		ledger := &kubelet.MemoryLedger{}
		cs := probeNodeAPI(ctx, ledger)
		pods := cs.CoreV1().Pods("default")
		p := simPod("db", nil)
		p.Spec.NodeName = probeNode
		p.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "c": "ignore-term"}
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
		old, err := pods.Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		started := func(uid string) func() bool {
			return func() bool {
				for _, e := range ledger.Entries() {
					if e.UID == uid && e.Action == kubelet.ActionStart {
						return true
					}
				}
				return false
			}
		}
		Eventually(started(string(old.UID))).WithTimeout(20 * time.Second).Should(BeTrue())

		Expect(pods.Delete(ctx, "db", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})).To(Succeed())
		deleted := time.Now()
		_, err = pods.Get(ctx, "db", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the object is gone at once: %v", err)
		again, err := pods.Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "the name can be reused at once")
		Expect(again.UID).NotTo(Equal(old.UID))

		// The old container ignores TERM: the kubelet still stops it, after
		// the API object is long gone (PS-6), with a short grace (LC-13).
		var stoppedAt time.Time
		Eventually(func() bool {
			for _, e := range ledger.Entries() {
				if e.UID == string(old.UID) && (e.Action == kubelet.ActionExit) {
					stoppedAt = e.Wall
					return true
				}
			}
			return false
		}).WithTimeout(30*time.Second).Should(BeTrue(), "the kubelet stops the force-deleted pod's container")
		Expect(stoppedAt).To(BeTemporally(">", deleted), "the process outlived its API object")
		Eventually(started(string(again.UID))).WithTimeout(20*time.Second).Should(BeTrue(), "the new pod of the same name runs")
	})
})
