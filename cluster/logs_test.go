package cluster_test

import (
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

// kubectl logs of a simulated container: what its script did, through the
// API server, from the node's runtime; --previous shows the instance a
// liveness kill ended; a node whose kubelet is down does not answer.
func TestPodLogsThroughTheAPI(t *testing.T) {
	c, ledger, cs := startKubeletCluster(t, 1)
	createPod(t, cs, livenessKilledPod())
	waitFor(t, "second start", 30*time.Second, func() bool { return len(entries(ledger, "p", kubelet.ActionStart)) >= 2 })
	cur := readLog(t, cs, "p", false)
	if !strings.Contains(cur, "container app of pod default/p started (attempt 1)") {
		t.Errorf("current log:\n%s", cur)
	}
	prev := readLog(t, cs, "p", true)
	for _, want := range []string{"started (attempt 0)", "liveness probe: Success", "liveness probe: Failure",
		"received SIGTERM (grace period 3 s): ignoring it", "received SIGKILL", "exited with code 137 (Error)"} {
		if !strings.Contains(prev, want) {
			t.Errorf("previous log lacks %q:\n%s", want, prev)
		}
	}
	if err := c.StopKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CoreV1().Pods("default").GetLogs("p", &corev1.PodLogOptions{}).Stream(t.Context())
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "kubelet of node node-0 is not running") {
		t.Errorf("logs with the kubelet down: %v", err)
	}
}

func readLog(t *testing.T, cs kubernetes.Interface, pod string, previous bool) string {
	t.Helper()
	rc, err := cs.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{Previous: previous, Timestamps: true}).Stream(t.Context())
	if err != nil {
		t.Fatalf("logs of %s (previous %v): %v", pod, previous, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A cluster starts with kube-apiserver's namespaces.
func TestSystemNamespaces(t *testing.T) {
	_, _, cs := startKubeletCluster(t, 1)
	list, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, ns := range list.Items {
		have[ns.Name] = true
	}
	for _, ns := range cluster.SystemNamespaces {
		if !have[ns] {
			t.Errorf("namespace %s missing; have %v", ns, have)
		}
	}
}
