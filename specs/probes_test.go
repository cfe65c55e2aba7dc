package specs_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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
	"github.com/podsafe/podsafe/controller"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/nemesis"
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

	// partitioned binds a pod that runs until stopped to node-0 of a cluster
	// with kubelets and controllers and makes the node stop heart-beating: on
	// the embedded target (one node; time scale 200: the node controller's
	// 50 s monitor grace and 300 s toleration take under 2 s) a
	// partition-node cut from the control plane; on the kube target (time
	// scale 1, the run's shortened 10 s grace and 10 s toleration) a crash of
	// the node's kubelet, which stops its lease and status as a cut does (the
	// pod's process runs on). There the cluster has a second node, Ready:
	// when every node is down, kube-controller-manager's node lifecycle
	// controller enters its "master disruption mode" and evicts nothing (on
	// a one-node cluster the pods of a dead node are never deleted). It
	// returns the client.
	partitioned := func(ctx context.Context, opts cluster.ControllerOptions) kubernetes.Interface {
		topo := cluster.DefaultTopology(1, 1, 1)
		var cs kubernetes.Interface
		var c *cluster.Cluster
		var env probeEnv
		if onKubeTarget() {
			env = probeNodes(ctx, probeOpts{nodes: cluster.DefaultTopology(1, 2, 1).Nodes, controller: opts})
			cs = env.cs
		} else {
			c, cs = probeCluster(ctx, cluster.Config{Topology: topo, Kubelets: true, Controllers: true, TimeScale: 200, Controller: opts})
		}
		p := simPod("cut-off", nil)
		p.Spec.NodeName = topo.Nodes[0].Name
		_, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() corev1.PodPhase {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Status.Phase
		}).WithTimeout(20 * time.Second).Should(Equal(corev1.PodRunning))
		if c == nil {
			Expect(env.stopKubelet(topo.Nodes[0].Name)).To(Succeed())
			return cs
		}
		faults, err := nemesis.Lookup("partition-node")
		Expect(err).NotTo(HaveOccurred())
		inj, err := faults[0].Inject(ctx, cluster.AsTarget(c), rand.New(rand.NewPCG(1, 2)))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(inj.Heal)
		return cs
	}
	// nodeLostWait is how long the node controller may take to act on a
	// node that stopped heart-beating: seconds on the embedded target, the
	// 10 s grace, 10 s toleration and the controllers' periods on kube.
	nodeLostWait := func() time.Duration {
		if onKubeTarget() {
			return 2 * time.Minute
		}
		return 30 * time.Second
	}

	It("PS-13, PS-17: the pods of a node that stopped heart-beating show NodeDown and are deleted gracefully", Label("PS-13", "PS-17", "PS", onKube), func(ctx SpecContext) {
		cs := partitioned(ctx, cluster.ControllerOptions{})
		var pod *corev1.Pod
		Eventually(func() bool {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "the pod is only marked for deletion while its kubelet is cut off")
			pod = p

			return p.DeletionTimestamp != nil
		}).WithTimeout(nodeLostWait()).Should(BeTrue(), "the node controller deletes the pods of a node that stopped heart-beating")
		// podsafe names the cause podsafe.io/NodeDown; Kubernetes, which
		// carried the proposal's NodeDown out as pod disruption conditions,
		// sets DisruptionTarget with reason DeletionByTaintManager before
		// the taint eviction controller deletes the pod.
		condType, reason := controller.PodConditionNodeDown, controller.ReasonNodeDown
		if onKubeTarget() {
			condType, reason = corev1.DisruptionTarget, "DeletionByTaintManager"
		}
		var down *corev1.PodCondition
		for i, c := range pod.Status.Conditions {
			if c.Type == condType {
				down = &pod.Status.Conditions[i]
			}
		}
		Expect(down).NotTo(BeNil(), "clients see why: conditions %+v", pod.Status.Conditions)
		Expect(down.Status).To(Equal(corev1.ConditionTrue))
		Expect(down.Reason).To(Equal(reason))
		Expect(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)).To(BeNumerically(">", 0), "a graceful deletion, never a force deletion (PS-9)")
		Consistently(func() error {
			_, err := cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
			return err
		}).WithTimeout(2*time.Second).Should(Succeed(), "nobody removes the object while the kubelet cannot confirm")
	})

	It("LC-4: under the NodeLost policy the pods of a lost node are set to Failed after their toleration", Label("LC-4", "LC", onKube), func(ctx SpecContext) {
		cs := partitioned(ctx, cluster.ControllerOptions{FailPodsOnLostNode: true})
		if onKubeTarget() {
			// Kubernetes has no such policy: the taint eviction controller
			// deletes the pod gracefully and nothing sets it Failed while
			// its node is only unreachable (pod GC fails pods only of
			// deleted or out-of-service nodes). What it does is recorded.
			var p *corev1.Pod
			Eventually(func() bool {
				var err error
				p, err = cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				return p.DeletionTimestamp != nil
			}).WithTimeout(nodeLostWait()).Should(BeTrue(), "the pod of the lost node is deleted gracefully")
			Consistently(func() corev1.PodPhase {
				var err error
				p, err = cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				return p.Status.Phase
			}).WithTimeout(15*time.Second).ShouldNot(Equal(corev1.PodFailed), "no NodeLost policy on Kubernetes")
			Skip(fmt.Sprintf("not covered on kube: Kubernetes has no policy that sets the pods of a lost node Failed; observed: the pod was deleted with grace %ds and stayed %s, Terminating, for 15 s after",
				ptr.Deref(p.DeletionGracePeriodSeconds, 0), p.Status.Phase))
		}
		Eventually(func() corev1.PodPhase {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Status.Phase
		}).WithTimeout(30 * time.Second).Should(Equal(corev1.PodFailed))
		p, err := cs.CoreV1().Pods("default").Get(ctx, "cut-off", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Status.Reason).To(Equal("NodeLost"))
	})

	It("LC-14: failed pods stay until deleted; pod GC removes the oldest terminated pods above its threshold", Label("LC-14", "LC", onKube), func(ctx SpecContext) {
		topo := cluster.DefaultTopology(1, 1, 1)
		// kube-controller-manager's pod GC looks every 20 s.
		wait := 30 * time.Second
		if onKubeTarget() {
			wait = 90 * time.Second
		}
		cs := probeNodes(ctx, probeOpts{nodes: topo.Nodes, controllers: true, timeScale: 200,
			controller: cluster.ControllerOptions{TerminatedPodThreshold: 3}}).cs
		pods := cs.CoreV1().Pods("default")
		for i := range 5 {
			p := simPod(fmt.Sprintf("done-%d", i), nil)
			p.Spec.NodeName = topo.Nodes[0].Name
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "c": "run=1s exit=1"}
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			time.Sleep(20 * time.Millisecond) // distinct creation order
		}
		Eventually(func() int {
			l, err := pods.List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			return len(l.Items)
		}).WithTimeout(wait).Should(Equal(3), "pod GC keeps the threshold's 3 terminated pods")
		l, err := pods.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range l.Items {
			Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		}
		Consistently(func() int {
			l, err := pods.List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			return len(l.Items)
		}).WithTimeout(2*time.Second).Should(Equal(3), "failed pods at or below the threshold stay")
	})

	It("LC-9: liveness failure kills and restarts the container; readiness gates Ready", Label("LC-9", "LC", onKube), func(ctx SpecContext) {
		topo := cluster.DefaultTopology(1, 1, 1)
		ledger := &kubelet.MemoryLedger{}
		cs := probeNodeAPI(ctx, ledger)
		// Clock time: at the embedded probe's time scale 50 these are 0.1 s
		// and 0.6 s; the kube target runs at 1.
		script := "ready-after=50s liveness-fail-at=100s"
		if onKubeTarget() {
			script = "ready-after=3s liveness-fail-at=8s"
		}
		probe := func() *corev1.Probe {
			return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, FailureThreshold: 1}
		}
		p := simPod("probed", nil)
		p.Spec.NodeName = topo.Nodes[0].Name
		p.Spec.Containers[0].LivenessProbe = probe()
		p.Spec.Containers[0].ReadinessProbe = probe()
		p.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "c": script}
		// Every version of the pod, from before it exists: whether it was
		// Running and not yet Ready is read from what the store held, not
		// from a Get that a slow machine may make too late.
		w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=probed"})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		var (
			versionsMu sync.Mutex
			versions   []*corev1.Pod
		)
		go func() {
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*corev1.Pod); ok {
					versionsMu.Lock()
					versions = append(versions, p)
					versionsMu.Unlock()
				}
			}
		}()
		podReady := func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					return c.Status == corev1.ConditionTrue
				}
			}
			return false
		}
		pod, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ready := func() bool {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "probed", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return podReady(p)
		}
		Eventually(ready).WithTimeout(40*time.Second).Should(BeTrue(), "ready once the readiness probe succeeds")
		Eventually(func() bool {
			versionsMu.Lock()
			defer versionsMu.Unlock()
			return slices.ContainsFunc(versions, podReady)
		}).WithTimeout(20*time.Second).Should(BeTrue(), "the watch delivered the Ready version")
		versionsMu.Lock()
		firstReady := slices.IndexFunc(versions, podReady)
		runningNotReady := slices.ContainsFunc(versions[:firstReady], func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		versionsMu.Unlock()
		Expect(runningNotReady).To(BeTrue(), "the pod was Running and not Ready before the readiness probe succeeded")
		// The liveness probe fails from 30 s: the kubelet kills the
		// container, which restartPolicy Always restarts on the same node.
		Eventually(func() int {
			starts := 0
			for _, e := range ledger.Entries() {
				if e.UID == string(pod.UID) && e.Action == kubelet.ActionStart {
					starts++
				}
			}
			return starts
		}).WithTimeout(30*time.Second).Should(BeNumerically(">=", 2), "the container was restarted after its liveness failure")
		var stopped bool
		for _, e := range ledger.Entries() {
			if e.UID == string(pod.UID) && (e.Action == kubelet.ActionTerm || e.Action == kubelet.ActionKill) {
				stopped = true
			}
			if e.UID == string(pod.UID) {
				Expect(e.Node).To(Equal(topo.Nodes[0].Name), "restarts only on the same node")
			}
		}
		Expect(stopped).To(BeTrue(), "the liveness failure stopped the container with a signal")
	})

	It("GP-4, GP-7, PR-14: soft eviction replaces the grace by its maximum, waits it out, and spares pods within their requests", Label("GP-4", "GP-7", "PR-14", "GP", "PR", onKube), func(ctx SpecContext) {
		const maxGrace = 4
		topo := cluster.DefaultTopology(1, 1, 1)
		ledger := &kubelet.MemoryLedger{}
		cs := probeNodes(ctx, probeOpts{nodes: topo.Nodes, ledger: ledger, timeScale: 50,
			kubelet: cluster.KubeletOptions{EvictionSoft: 1 << 30, EvictionSoftGracePeriod: 3 * time.Second,
				EvictionMaxPodGracePeriod: maxGrace, EvictionEvery: time.Second}}).cs
		memPod := func(name, request string) *corev1.Pod {
			p := simPod(name, nil)
			p.Spec.NodeName = topo.Nodes[0].Name
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
			p.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "c": "ignore-term mem=600Mi"}
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)}
			return p
		}
		for _, p := range []*corev1.Pod{memPod("within", "600Mi"), memPod("greedy", "100Mi")} {
			_, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() string {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "greedy", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return string(p.Status.Phase) + "/" + p.Status.Reason
		}).WithTimeout(30*time.Second).Should(Equal("Failed/"+kubelet.ReasonEvicted), "the pod most above its requests is evicted")
		var term, kill *kubelet.LedgerEntry
		for _, e := range ledger.Entries() {
			switch {
			case e.Pod == "within":
				Expect(e.Action).To(Equal(kubelet.ActionStart), "the pod within its requests is never touched (PR-14): %+v", e)
			case e.Pod == "greedy" && e.Action == kubelet.ActionTerm:
				term = &e
			case e.Pod == "greedy" && e.Action == kubelet.ActionKill:
				kill = &e
			}
		}
		Expect(term).NotTo(BeNil())
		Expect(kill).NotTo(BeNil(), "the container ignores TERM: the kubelet kills it when the grace runs out")
		Expect(term.Grace).To(BeEquivalentTo(maxGrace), "the eviction's grace replaces the pod's 30 s (GP-4)")
		Expect(kill.Scaled.Sub(term.Scaled)).To(BeNumerically(">=", maxGrace*time.Second), "soft eviction waits EvictionMaxPodGracePeriod (GP-7)")
	})

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
		// bound, or "" if it stays unbound for 5 s (wall; 15 s on the kube
		// target, whose scheduler backs off up to 10 s).
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
			bound := ""
			wait := 5 * time.Second
			if onKubeTarget() {
				wait = 15 * time.Second
			}
			deadline := time.Now().Add(wait)
			for time.Now().Before(deadline) && bound == "" {
				p, err := pods.Get(ctx, mypod.Name, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				bound = p.Spec.NodeName
				time.Sleep(50 * time.Millisecond)
			}
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
