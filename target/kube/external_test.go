package kube

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/target"
)

// TestExternalTarget: the kubeconfig target on an existing cluster (a real
// control plane podsafe starts for the test, reached only through its admin
// kubeconfig, with no node of podsafe's). podsafe registers its nodes there,
// labelled and tainted, as their own node identities (the Node authorizer
// refuses one node's write to another); a pod placed for them runs there;
// its kubelets can be crashed and their links cut at their own sockets (the
// node goes NotReady); the control plane itself cannot be touched; Close
// leaves nothing of podsafe's behind.
func TestExternalTarget(t *testing.T) {
	host, _ := startCluster(t, Config{Etcd: 1}, 0)
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if _, err := host.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if _, err := NewExternal(ctx, ExternalConfig{Kubeconfig: filepath.Join(t.TempDir(), "none")}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a missing kubeconfig: %v, want ErrInvalidConfig", err)
	}
	c, err := NewExternal(ctx, ExternalConfig{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	if c.Kind() != "kubeconfig" || c.Members() != 0 || c.ServerVersion() != host.cfg.Binaries.Versions.Kubernetes {
		t.Errorf("kind %s, members %d, version %s", c.Kind(), c.Members(), c.ServerVersion())
	}
	if c.Can(target.Kill, ExternalAPIServer) || c.Can(target.Pause, ExternalAPIServer) {
		t.Error("the target offers to kill or pause a control plane podsafe does not own")
	}
	if c.NodeIdentity() != "system:node:NAME (group system:nodes)" {
		t.Errorf("an admin kubeconfig should impersonate the nodes: %s", c.NodeIdentity())
	}
	l := &ledger{}
	specs := []NodeSpec{{Name: "node-0"}, {Name: "node-1"}}
	if err := c.StartKubelets(ctx, specs, KubeletOptions{Ledger: l}); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(mustREST(t, host, AdminUser))
	for _, s := range specs {
		n, err := admin.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tainted := false
		for _, tt := range n.Spec.Taints {
			tainted = tainted || tt.Key == NodeTaint
		}
		if n.Labels[NodeLabel] != "true" || !tainted {
			t.Errorf("node %s: labels %v taints %v, want podsafe's label and taint", s.Name, n.Labels, n.Spec.Taints)
		}
	}
	// Each kubelet is its node: node-0 may not change node-1.
	rc0, err := c.RESTConfig(NodeUser("node-0"), "node-0", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(rc0).CoreV1().Nodes().Patch(ctx, "node-1", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node-0's kubelet patching node-1: %v, want Forbidden", err)
	}

	// podsafe's own clients speak JSON, so their recorded calls carry the
	// UID and resourceVersion of the answer.
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), history.Meta{Scenario: "external"})
	if err != nil {
		t.Fatal(err)
	}
	wrc, err := c.RESTConfig(WorkloadUser, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	wrc.WrapTransport = rec.WrapTransport("workload")
	cm, err := kubernetes.NewForConfigOrDie(wrc).CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "podsafe-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Close()
	h, err := history.Load(rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.API) != 1 || h.API[0].UID != string(cm.UID) || h.API[0].ResourceVersion != cm.ResourceVersion || h.API[0].Name != cm.Name {
		t.Errorf("recorded create %+v, want UID %s rv %s name %s", h.API, cm.UID, cm.ResourceVersion, cm.Name)
	}
	admin.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{})

	// A pod placed for podsafe's nodes runs on one of them.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podsafe-ext"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "podsafe-ext"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "podsafe.io/sim:1"}}}}
	c.Placement(&pod.Spec)
	eventually(ctx, t, "creating the pod", func() error {
		_, err := admin.CoreV1().Pods("podsafe-ext").Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	eventually(ctx, t, "the pod running", func() error {
		if l.starts("p") == 0 {
			return fmt.Errorf("not started in the ledger")
		}
		return nil
	})

	// Kill and restart a kubelet.
	if err := c.Kill(ctx, KubeletComponent("node-0")); err != nil || c.Running(KubeletComponent("node-0")) {
		t.Errorf("kill: %v, running %v", err, c.Running(KubeletComponent("node-0")))
	}
	if err := c.Restart(ctx, KubeletComponent("node-0")); err != nil || !c.Running(KubeletComponent("node-0")) {
		t.Errorf("restart: %v, running %v", err, c.Running(KubeletComponent("node-0")))
	}
	// Cut node-1 from the cluster at its sockets: the node controller sees
	// it go silent; the heal brings it back.
	heal, err := c.Cut(ctx, c.nodeLinks("node-1", false))
	if err != nil {
		t.Fatal(err)
	}
	waitNodeReady(ctx, t, admin, "node-1", false)
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(ctx, t, admin, "node-1", true)

	closed = true
	if err := c.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}
	for _, s := range specs {
		if _, err := admin.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("node %s after Close: %v, want it removed", s.Name, err)
		}
	}
	ns, err := admin.CoreV1().Namespaces().Get(ctx, "podsafe-ext", metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Error("the namespace podsafe's run created is still there, not terminating")
	}
	if ns, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("the cluster's own namespace default: %v, %v", err, ns.DeletionTimestamp)
	}
}

func mustREST(t *testing.T, c *Cluster, user string) *rest.Config {
	t.Helper()
	rc, err := c.RESTConfig(user, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}
