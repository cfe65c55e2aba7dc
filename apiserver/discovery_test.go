package apiserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/podsafe/podsafe/raftstore"
)

// TestDiscovery checks client-go discovery and a REST mapper built from it.
func TestDiscovery(t *testing.T) {
	e := newTestEnv(t)
	dc := e.client(IdentityWorkload).Discovery()
	v, err := dc.ServerVersion()
	if err != nil || v.Major != "1" {
		t.Fatalf("ServerVersion = %v, %v", v, err)
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var gotGroups []string
	for _, g := range groups {
		gotGroups = append(gotGroups, g.Name)
	}
	sort.Strings(gotGroups)
	wantGroups := []string{"", "apps", "authentication.k8s.io", "authorization.k8s.io", "coordination.k8s.io", "events.k8s.io", "policy", "scheduling.k8s.io", "storage.k8s.io"}
	if diff := cmp.Diff(wantGroups, gotGroups); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	served := map[string]bool{}
	for _, list := range resources {
		for _, r := range list.APIResources {
			served[list.GroupVersion+" "+r.Name] = true
		}
	}
	for _, want := range []string{"v1 pods", "v1 pods/status", "v1 pods/binding", "v1 pods/eviction", "v1 nodes", "v1 nodes/status",
		"v1 events", "coordination.k8s.io/v1 leases", "scheduling.k8s.io/v1 priorityclasses", "policy/v1 poddisruptionbudgets",
		"policy/v1 poddisruptionbudgets/status", "apps/v1 statefulsets/scale", "apps/v1 replicasets/status",
		"storage.k8s.io/v1 volumeattachments/status", "v1 services", "v1 services/status"} {
		if !served[want] {
			t.Errorf("discovery lacks %s", want)
		}
	}
	gr, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDiscoveryRESTMapper(gr), dc, func(string) {})
	for short, want := range map[string]string{"po": "pods", "pdb": "poddisruptionbudgets.policy", "sts": "statefulsets.apps", "svc": "services"} {
		gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: short})
		if err != nil || gvr.GroupResource().String() != want {
			t.Errorf("mapping %q = %v, %v; want %s", short, gvr, err, want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/livez", "/version"} {
		resp := e.rawRequest("GET", path, "", "", nil)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s without a token: %d, want 200", path, resp.StatusCode)
		}
	}
}

// TestKubectl drives the server with kubectl, when it is installed. Tokens
// from a kubeconfig are only sent over HTTPS, so the server runs with TLS.
func TestKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	e := startTestEnv(t, raftstore.OpenTestCluster(t, 1).Stores[0], true)
	e.seedNode(makeNode("node-1").obj())
	e.seedPod(makePod("a").node("node-1").obj())
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters:
- name: podsafe
  cluster: {server: "`+e.http.URL+`", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: `+tokenOf(IdentityAdmin)+`}
contexts:
- name: podsafe
  context: {cluster: podsafe, user: admin}
current-context: podsafe
`)
	manifest := filepath.Join(dir, "pod.yaml")
	writeFile(t, manifest, "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers: [{name: c, image: busybox}]\n")
	badManifest := filepath.Join(dir, "bad.yaml")
	writeFile(t, badManifest, "apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec:\n  foo: 1\n  containers: [{name: c, image: busybox}]\n")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "Server Version: v1.37.2-podsafe"},
		{[]string{"api-resources"}, "poddisruptionbudgets"},
		{[]string{"get", "pods", "-A"}, "default     a"},
		{[]string{"get", "nodes", "-o", "name"}, "node/node-1"},
		{[]string{"create", "-f", manifest}, "pod/b created"},
		{[]string{"create", "-f", badManifest, "||"}, `strict decoding error: unknown field "spec.foo"`},
		{[]string{"label", "pod", "b", "tier=web"}, "pod/b labeled"},
		{[]string{"get", "pods", "-l", "tier=web", "-o", "jsonpath={.items[*].metadata.name}"}, "b"},
		{[]string{"get", "pods", "--field-selector", "spec.nodeName=node-1", "-o", "name"}, "pod/a"},
		{[]string{"delete", "pod", "b"}, `pod "b" deleted`},
		{[]string{"get", "pod", "a", "-o", "jsonpath={.spec.terminationGracePeriodSeconds}"}, "30"},
	}
	for _, tt := range tests {
		// A trailing "||" marks a command that must fail.
		args, mustFail := tt.args, tt.args[len(tt.args)-1] == "||"
		if mustFail {
			args = args[:len(args)-1]
		}
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if (err != nil) != mustFail || !strings.Contains(string(out), tt.want) {
			t.Errorf("kubectl %s: %v\n%s\nwant output containing %q", strings.Join(tt.args, " "), err, out, tt.want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServices: Services are served like every resource, their status is
// the status subresource's, and they select by spec.type and
// spec.clusterIP as kube-apiserver's do.
func TestServices(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	cs := e.client(IdentityWorkload)
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "edge"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "edge"},
				Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		created, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(created.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("%s: status kept on create: %+v", svc.Name, created.Status)
		}
	}
	list, err := cs.CoreV1().Services("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.type=NodePort"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "edge" {
		t.Errorf("spec.type=NodePort listed %+v, want edge only", list.Items)
	}
	if _, err := cs.CoreV1().Services("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.selector=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("an unknown field selector: err %v, want BadRequest", err)
	}
}
