package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/fencing"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/target"
)

// TestKubeTarget runs one real control plane (three etcd members, one API
// server) with two podsafe nodes and shows, on it, that a StatefulSet runs,
// and that each fault kind bites: a killed process is gone and restarts on
// its data, a paused one is stopped, a cut link drops packets and the node
// controller sees the node go silent.
func TestKubeTarget(t *testing.T) {
	c, l := startCluster(t, Config{Etcd: 3}, 2)
	t.Logf("network: %s %s", c.NetworkMode(), c.NetworkFaultsUnavailable())
	rc, err := c.RESTConfig(AdminUser, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	t.Run("statefulset", func(t *testing.T) {
		labels := map[string]string{"app": "pet"}
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "pet", Namespace: "default"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "podsafe.io/sim:1"}}},
				},
			},
		}
		eventually(ctx, t, "creating the StatefulSet", func() error {
			_, err := cs.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{})
			return err
		})
		waitReadyReplicas(ctx, t, cs, 2)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			if v := n.Status.NodeInfo.KubeletVersion; v != c.cfg.Binaries.Versions.Kubernetes {
				t.Errorf("node %s reports kubelet %q, want the control plane's %s", n.Name, v, c.cfg.Binaries.Versions.Kubernetes)
			}
		}
		for _, pod := range []string{"pet-0", "pet-1"} {
			if n := l.starts(pod); n != 1 {
				t.Errorf("%s started %d times in the ledger, want 1", pod, n)
			}
		}
	})

	// A pet with a claim of podsafe's storage class: podsafe's CSI
	// controller provisions its volume, the real attach/detach controller
	// attaches it by the CSI attachment name the kubelet looks for, the
	// node reports it in use before the pet starts, and the pet's writes
	// reach the storage server from its node. A replacement pet (new UID)
	// writes the same volume once the old one is gone.
	t.Run("volumes", func(t *testing.T) {
		labels := map[string]string{"app": "vol"}
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "default"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{kubelet.ScriptAnnotationPrefix + "c": "write=500ms"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "podsafe.io/sim:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
						TerminationGracePeriodSeconds: ptr.To(int64(2))},
				},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(StorageClass),
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
			},
		}
		eventually(ctx, t, "creating the StatefulSet", func() error {
			_, err := cs.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{})
			return err
		})
		const volume = "default.data-vol-0"
		var first kubelet.LedgerEntry
		eventually(ctx, t, "the pet writing its volume", func() error {
			w := l.writes("vol-0")
			if len(w) == 0 {
				return fmt.Errorf("no write of vol-0 yet")
			}
			first = w[0]
			return nil
		})
		if first.Volume != volume || first.Token <= 0 {
			t.Errorf("first write %+v: want volume %s with the attachment's token", first, volume)
		}
		va, err := cs.StorageV1().VolumeAttachments().Get(ctx, kubelet.CSIAttachmentName(volume, CSIDriver, first.Node), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the attachment of %s on %s under the CSI attacher's name: %v", volume, first.Node, err)
		}
		if !va.Status.Attached || va.Spec.Attacher != CSIDriver || va.Spec.NodeName != first.Node {
			t.Errorf("attachment %+v: want attached by %s to %s", va, CSIDriver, first.Node)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, first.Node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := corev1.UniqueVolumeName(kubelet.CSIUniqueVolumeName(CSIDriver, volume)); !slices.Contains(node.Status.VolumesInUse, want) {
			t.Errorf("node %s reports volumes in use %v, want %s", first.Node, node.Status.VolumesInUse, want)
		}
		if err := cs.CoreV1().Pods("default").Delete(ctx, "vol-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the replacement pet writing the volume", func() error {
			for _, w := range l.writes("vol-0") {
				if w.UID != first.UID {
					return nil
				}
			}
			return fmt.Errorf("no write of a new vol-0 yet")
		})
		// The storage took the writes in order: none of the old pet after
		// the replacement's first.
		newSeen := false
		for _, w := range l.writes("vol-0") {
			switch {
			case w.UID != first.UID:
				newSeen = true
			case newSeen:
				t.Errorf("the old pet wrote %s after its replacement did: %+v", volume, w)
			}
		}
		if err := cs.AppsV1().StatefulSets("default").Delete(ctx, "vol", metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})

	t.Run("etcd-tls", func(t *testing.T) {
		// etcd serves TLS only and wants a client certificate of the
		// cluster CA, as the API servers present.
		if err := c.etcdHealthy(ctx, 0); err != nil {
			t.Fatalf("with the client certificate: %v", err)
		}
		noCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.CertPool(), MinVersion: tls.VersionTLS12}}}
		if resp, err := noCert.Get(c.etcdURL(0) + "/health"); err == nil {
			resp.Body.Close()
			t.Errorf("etcd answered a client without a certificate: %s", resp.Status)
		}
		plain := &http.Client{Timeout: 3 * time.Second}
		if resp, err := plain.Get("http://" + hostport(c.lay.etcd[0], EtcdClientPort) + "/health"); err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			t.Error("etcd answered plain HTTP")
		}
	})

	t.Run("kill-etcd-leader", func(t *testing.T) {
		leader, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name := etcdName(leader)
		pid := c.Pid(name)
		if err := c.Kill(ctx, name); err != nil {
			t.Fatal(err)
		}
		if c.Running(name) || processAlive(pid) {
			t.Fatalf("%s (pid %d) still alive after kill", name, pid)
		}
		// Two of three members keep the API serving.
		eventually(ctx, t, "reading through the surviving quorum", func() error {
			_, err := cs.AppsV1().StatefulSets("default").Get(ctx, "pet", metav1.GetOptions{})
			return err
		})
		if err := c.Restart(ctx, name); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, name+" healthy again on its data", func() error { return c.etcdHealthy(ctx, leader) })
		waitReadyReplicas(ctx, t, cs, 2)
	})

	t.Run("pause-scheduler", func(t *testing.T) {
		name := schedulerName(0)
		if err := c.Pause(ctx, name); err != nil {
			t.Fatal(err)
		}
		// SIGSTOP is delivered asynchronously: every thread stops soon.
		eventually(ctx, t, name+" stopped", func() error {
			if st := procState(c.Pid(name)); st != "T" {
				return fmt.Errorf("in state %q, want T (stopped)", st)
			}
			return nil
		})
		if !c.Paused(name) || !c.Running(name) {
			t.Errorf("paused %s: Paused %v Running %v, want both", name, c.Paused(name), c.Running(name))
		}
		if err := c.Resume(ctx, name); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, name+" running again", func() error {
			if st := procState(c.Pid(name)); st == "T" || st == "" {
				return fmt.Errorf("in state %q", st)
			}
			return nil
		})
	})

	t.Run("pause-kubelet", func(t *testing.T) {
		if !c.Can(target.Pause, KubeletComponent("node-0")) {
			t.Skip(c.NetworkFaultsUnavailable())
		}
		if err := c.Pause(ctx, KubeletComponent("node-0")); err != nil {
			t.Fatal(err)
		}
		if !c.Paused(KubeletComponent("node-0")) || !c.Running(KubeletComponent("node-0")) {
			t.Fatal("a paused kubelet must be paused and running")
		}
		// Its clock stands still and its packets are dropped.
		clk := c.kl.clocks["node-0"]
		before := clk.Now()
		nrc, err := c.RESTConfig(NodeUser("node-0"), "node-0", 0)
		if err != nil {
			t.Fatal(err)
		}
		nrc.Timeout = 2 * time.Second
		if _, err := kubernetes.NewForConfigOrDie(nrc).CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{}); err == nil {
			t.Error("a paused kubelet's host reached the API server")
		}
		if !clk.Now().Equal(before) {
			t.Errorf("a paused kubelet's clock moved from %v to %v", before, clk.Now())
		}
		if err := c.Resume(ctx, KubeletComponent("node-0")); err != nil {
			t.Fatal(err)
		}
		if err := c.Resume(ctx, KubeletComponent("node-0")); !errors.Is(err, target.ErrNotPaused) {
			t.Errorf("second resume: %v, want ErrNotPaused", err)
		}
		eventually(ctx, t, "node-0 reaches the API again", func() error {
			_, err := kubernetes.NewForConfigOrDie(nrc).CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
			return err
		})
	})

	t.Run("restart-after-exit", func(t *testing.T) {
		// A component that dies by itself (not by a fault) is started
		// again, as the kubelet restarts a static pod.
		name := controllerManagerName(0)
		pid := c.Pid(name)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, name+" restarted", func() error {
			if p := c.Pid(name); p == 0 || p == pid {
				return fmt.Errorf("pid %d (was %d)", p, pid)
			}
			return nil
		})
	})

	t.Run("api-store", func(t *testing.T) {
		if !c.Can(target.Network, "") {
			t.Skip(c.NetworkFaultsUnavailable())
		}
		heal, err := c.Cut(ctx, c.APIStoreLinks(0))
		if err != nil {
			t.Fatal(err)
		}
		// The API server is up, but no write reaches etcd.
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, werr := cs.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cut"}}, metav1.CreateOptions{})
		cancel()
		if werr == nil {
			t.Error("a write went through an API server cut from etcd")
		}
		for i := range c.lay.etcd {
			if err := c.etcdHealthy(ctx, i); err != nil {
				t.Errorf("etcd-%d unhealthy while only its API client was cut: %v", i, err)
			}
		}
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "a write after the heal", func() error {
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "healed"}}, metav1.CreateOptions{})
			return err
		})
	})

	t.Run("partition-node", func(t *testing.T) {
		if !c.Can(target.Network, "") {
			t.Skip(c.NetworkFaultsUnavailable())
		}
		heal, err := c.Cut(ctx, []target.Link{{From: "node-1", To: apiServerName(0)}, {From: apiServerName(0), To: "node-1"}})
		if err != nil {
			t.Fatal(err)
		}
		// The node's own connections are dropped: a request times out.
		nrc, err := c.RESTConfig(NodeUser("node-1"), "node-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		nrc.Timeout = 3 * time.Second
		if _, err := kubernetes.NewForConfigOrDie(nrc).CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err == nil {
			t.Error("node-1 reached the API server across the cut")
		}
		// The node controller sees the node go silent.
		waitNodeReady(ctx, t, cs, "node-1", false)
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		waitNodeReady(ctx, t, cs, "node-1", true)
	})

	// podsafe's fencing controller as an ordinary client of the real API
	// servers: a node cut off for longer than the threshold is powered off
	// (its pet's container dies, as the ledger shows), recorded as fenced,
	// and its pet force deleted, so the StatefulSet controller runs it again
	// elsewhere; only the admin's Unfence brings the node back.
	t.Run("fence", func(t *testing.T) {
		if !c.Can(target.Network, "") {
			t.Skip(c.NetworkFaultsUnavailable())
		}
		if !c.Can(target.Power, KubeletComponent("node-1")) {
			t.Fatal("the kube target cannot power off its own node")
		}
		if err := c.StartFencing(ctx, FencingOptions{Agents: []string{FenceAgentPower}}); err != nil {
			t.Fatal(err)
		}
		if err := c.StartFencing(ctx, FencingOptions{}); !errors.Is(err, target.ErrRunning) {
			t.Errorf("a second StartFencing: %v, want ErrRunning", err)
		}
		if _, err := c.FenceAgent(FenceAgentStorage); err != nil {
			t.Errorf("no storage fence agent with the storage server running: %v", err)
		}
		// Whichever pet runs on node-1 is the one to watch.
		waitReadyReplicas(ctx, t, cs, 2)
		var victim, oldUID string
		for _, p := range []string{"pet-0", "pet-1"} {
			if n, uid := podNode(ctx, cs, p); n == "node-1" {
				victim, oldUID = p, uid
			}
		}
		if victim == "" {
			t.Fatal("no pet runs on node-1")
		}
		startsBefore := l.starts(victim)
		heal, err := c.Cut(ctx, c.nodeLinks("node-1", true))
		if err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "node-1 fenced", func() error {
			if f := fenceOf(ctx, cs, "node-1"); f == nil || f.Status != corev1.ConditionTrue {
				return fmt.Errorf("condition %+v", f)
			}
			return nil
		})
		if !c.PoweredOff("node-1") || !c.Fenced("node-1") {
			t.Errorf("node-1 fenced by the API but powered off %v, fenced %v", c.PoweredOff("node-1"), c.Fenced("node-1"))
		}
		if c.Running(KubeletComponent("node-1")) {
			t.Error("node-1's kubelet runs after a power fence")
		}
		if err := c.Restart(ctx, KubeletComponent("node-1")); !errors.Is(err, target.ErrPoweredOff) {
			t.Errorf("restarting a fenced node's kubelet: %v, want ErrPoweredOff", err)
		}
		if err := c.PowerOn(ctx, "node-1"); !errors.Is(err, ErrFenced) {
			t.Errorf("powering on a fenced node: %v, want ErrFenced", err)
		}
		eventually(ctx, t, victim+" replaced on node-0", func() error {
			n, uid := podNode(ctx, cs, victim)
			if uid == oldUID || n != "node-0" {
				return fmt.Errorf("%s on %q (uid %s, the old one %s)", victim, n, uid, oldUID)
			}
			return nil
		})
		waitReadyReplicas(ctx, t, cs, 2)
		// The ledger: the old container died with the power before any
		// replacement started, and the replacements ran on node-0 one after
		// another. Usually there is one; the real kube-controller-manager
		// may replace it once more: its taint eviction controller, set off
		// by the fence's NoExecute taint on node-1, re-reads the evicted
		// pod by name when its first attempt fails and deletes whichever
		// pod has the name by then, the replacement on node-0 too
		// (repro/kubernetes-141568.yaml; podsafe's node-health checker judges that
		// eviction Illegal in a run). podsafe's fencing controller deletes
		// only the UIDs on the fenced node.
		checkFencedReplacements(t, l, victim, startsBefore)
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		if err := c.Unfence(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "node-1 Ready after Unfence", func() error {
			if !ready(ctx, cs, "node-1") {
				return fmt.Errorf("not Ready")
			}
			if f := fenceOf(ctx, cs, "node-1"); f != nil && f.Status == corev1.ConditionTrue {
				return fmt.Errorf("still fenced")
			}
			return nil
		})
		if c.PoweredOff("node-1") || c.Fenced("node-1") {
			t.Errorf("after Unfence: powered off %v, fenced %v", c.PoweredOff("node-1"), c.Fenced("node-1"))
		}
		// kill and restart of the fencing controller.
		if err := c.Kill(ctx, FencingComponent); err != nil || c.Running(FencingComponent) {
			t.Errorf("kill: %v, running %v", err, c.Running(FencingComponent))
		}
		if err := c.Restart(ctx, FencingComponent); err != nil || !c.Running(FencingComponent) {
			t.Errorf("restart: %v, running %v", err, c.Running(FencingComponent))
		}
	})
}

// fenceOf returns the podsafe.io/Fenced condition of node, or nil.
func fenceOf(ctx context.Context, cs kubernetes.Interface, node string) *corev1.NodeCondition {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for _, c := range n.Status.Conditions {
		if c.Type == fencing.FencedCondition {
			return &c
		}
	}
	return nil
}

// podNode is the node pod is bound to and its UID ("" when it is absent).
func podNode(ctx context.Context, cs kubernetes.Interface, pod string) (string, string) {
	p, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", ""
	}
	return p.Spec.NodeName, string(p.UID)
}

func waitReadyReplicas(ctx context.Context, t *testing.T, cs kubernetes.Interface, want int32) {
	t.Helper()
	eventually(ctx, t, "StatefulSet ready", func() error {
		s, err := cs.AppsV1().StatefulSets("default").Get(ctx, "pet", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Status.ReadyReplicas != want {
			pods, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			var states []string
			for _, p := range pods.Items {
				states = append(states, fmt.Sprintf("%s on %q %s deleting=%v conditions=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.Conditions))
			}
			return fmt.Errorf("%d of %d ready; pods: %v", s.Status.ReadyReplicas, want, states)
		}
		return nil
	})
}

func processAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// procState is the state letter of /proc/PID/stat ("T": stopped).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// checkFencedReplacements checks the ledger of pet victim after node-1 was
// powered off (see fencedReplacements).
func checkFencedReplacements(t *testing.T, l *ledger, victim string, startsBefore int) {
	t.Helper()
	l.mu.Lock()
	entries := slices.Clone(l.entries)
	l.mu.Unlock()
	n, problems := fencedReplacements(entries, victim, startsBefore)
	for _, p := range problems {
		t.Error(p)
	}
	if n > 1 {
		t.Logf("%s was replaced %d times after the fence (the taint eviction controller's eviction by name, repro/kubernetes-141568.yaml)", victim, n)
	}
	if t.Failed() {
		t.Logf("ledger of %s:\n%s", victim, l.dump(victim))
	}
}

// fencedReplacements judges the ledger of pet victim after node-1 was
// powered off with it running: the old container died with the power, and
// every start since the first startsBefore (at least one) was on node-0
// after that, each UID after the one before had exited, never two at once.
// It returns how many starts came after the fence and what is wrong.
func fencedReplacements(entries []kubelet.LedgerEntry, victim string, startsBefore int) (int, []string) {
	var problems []string
	off, starts := false, 0
	running := map[string]bool{}
	for _, e := range entries {
		if e.Pod != victim {
			continue
		}
		switch e.Action {
		case kubelet.ActionPowerOff:
			off = off || e.Node == "node-1"
			delete(running, e.UID)
		case kubelet.ActionExit:
			delete(running, e.UID)
		case kubelet.ActionStart:
			starts++
			if starts > startsBefore {
				if !off || e.Node != "node-0" {
					problems = append(problems, fmt.Sprintf("%s: start #%d on %s, node-1 powered off before it: %v; want every replacement on node-0 after the power-off", victim, starts, e.Node, off))
				}
				for uid := range running {
					problems = append(problems, fmt.Sprintf("%s: UID %s started on %s while UID %s still ran", victim, e.UID, e.Node, uid))
				}
			}
			running[e.UID] = true
		}
	}
	if starts <= startsBefore {
		problems = append(problems, fmt.Sprintf("%s: no start after the fence", victim))
	}
	return starts - startsBefore, problems
}
