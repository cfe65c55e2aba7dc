package kubectlconf

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// fatal is what kubectl would have exited with: its message and code.
type fatal struct {
	msg  string
	code int
}

// env is a running embedded cluster, served as `podsafe cluster up` serves
// it, and its kubeconfig.
type env struct {
	t          *testing.T
	kubeconfig string
	cacheDir   string
	kube       bool // the kube target
}

// startCluster starts a one-member cluster with two nodes, its kubelets,
// scheduler and controllers, on a TLS loopback listener, and writes its
// kubeconfig (a context per identity).
func startCluster(t *testing.T) *env {
	t.Helper()
	c, err := cluster.New(cluster.Config{Topology: cluster.DefaultTopology(1, 2, 1), TimeScale: 10,
		Kubelets: true, Scheduler: true, Controllers: true,
		// Errors (a handler's panic with its stack) go to stderr, so a
		// failing step's cause is in the test's output.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cert, err := cluster.NewServingCert()
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = c.ServeExternal(serveCtx, cert.Listener(tcp)) }()
	t.Cleanup(func() { stop(); <-served })
	dir := t.TempDir()
	e := &env{t: t, kubeconfig: filepath.Join(dir, "podsafe.kubeconfig"), cacheDir: filepath.Join(dir, "cache")}
	if _, err := c.WriteKubeconfig(e.kubeconfig, "https://"+tcp.Addr().String(), cert.CAPEM); err != nil {
		t.Fatal(err)
	}
	return e
}

// startKube starts the kube target as `podsafe cluster up --target kube`
// does — real etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager, with podsafe's kubelets as two nodes — or skips
// when its binaries are not built (PODSAFE_KUBE=1, as make test sets it:
// fails instead).
func startKube(t *testing.T) *env {
	t.Helper()
	bins, err := binaries.Cached(binaries.Options{})
	if err != nil {
		if os.Getenv("PODSAFE_KUBE") == "1" {
			t.Fatalf("kube binaries: %v", err)
		}
		t.Skipf("kube binaries not built (make kube-binaries): %v", err)
	}
	dir := t.TempDir()
	c, err := kube.New(kube.Config{Dir: filepath.Join(dir, "kube"), Binaries: bins, Etcd: 1, APIServers: 1, Network: kube.NetworkLoopback})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topo := cluster.DefaultTopology(1, 2, 1)
	var names []string
	var nodes []kube.NodeSpec
	for _, n := range topo.Nodes {
		names = append(names, n.Name)
		nodes = append(nodes, kube.NodeSpec{Name: n.Name, Labels: n.Labels, Taints: n.Taints})
	}
	if err := c.Start(ctx, names); err != nil {
		t.Fatalf("starting the kube target: %v (logs in %s)", err, dir)
	}
	if err := c.StartStorage(ctx, kube.StorageOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.StartKubelets(ctx, nodes, kube.KubeletOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, kubeconfig: filepath.Join(dir, "kube.kubeconfig"), cacheDir: filepath.Join(dir, "cache"), kube: true}
	if _, err := c.WriteKubeconfig(e.kubeconfig); err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager creates each namespace's default service
	// account, which pods need, shortly after it starts.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := e.kubectl("get", "serviceaccount", "default")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no default service account: %v", err)
		}
		time.Sleep(time.Second)
	}
	return e
}

// kubectl runs kubectl with args against the cluster, in process, and
// returns what it printed; an error is what kubectl would have exited with.
func (e *env) kubectl(args ...string) (out string, err error) {
	e.t.Helper()
	var stdout, stderr bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}
	full := append([]string{"--kubeconfig", e.kubeconfig, "--cache-dir", e.cacheDir}, args...)
	cmd := kubectlcmd.NewKubectlCommand(kubectlcmd.KubectlOptions{Arguments: append([]string{"kubectl"}, full...),
		ConfigFlags: genericclioptions.NewConfigFlags(true), IOStreams: streams})
	cmd.SetArgs(full)
	cmdutil.BehaviorOnFatal(func(msg string, code int) { panic(fatal{msg, code}) })
	defer cmdutil.DefaultBehaviorOnFatal()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			out, err = stdout.String(), fmt.Errorf("kubectl %s: exit %d: %s%s", strings.Join(args, " "), f.code, stderr.String(), f.msg)
		}
	}()
	if err := cmd.Execute(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// must runs kubectl and fails the test on an error.
func (e *env) must(args ...string) string {
	e.t.Helper()
	out, err := e.kubectl(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	return out
}

// refused runs kubectl, which must fail saying want.
func (e *env) refused(want string, args ...string) {
	e.t.Helper()
	out, err := e.kubectl(args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		e.t.Errorf("kubectl %s: %v (printed %q), want an error saying %q", strings.Join(args, " "), err, out, want)
	}
}

// contains fails unless out contains every one of want.
func contains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// header is the first line of out with its columns' spacing collapsed.
func header(out string) string {
	line, _, _ := strings.Cut(out, "\n")
	return strings.Join(strings.Fields(line), " ")
}

// TestKubectl drives the embedded cluster through every step; the steps
// both targets serve alike run on the kube target too, which makes this a
// differential test of podsafe's API server against kube-apiserver.
func TestKubectl(t *testing.T) {
	e := startCluster(t)
	common(t, e)
	embeddedOnly(t, e)
}

func TestKubectlOnKube(t *testing.T) {
	if testing.Short() {
		t.Skip("the kube target starts real processes; skipped in -short")
	}
	common(t, startKube(t))
}

// common are the steps podsafe's API server and kube-apiserver answer
// alike.
func common(t *testing.T, e *env) {
	// get: kube-apiserver's columns.
	nodes := e.must("get", "nodes")
	if h := header(nodes); h != "NAME STATUS ROLES AGE VERSION" {
		t.Errorf("get nodes header %q:\n%s", h, nodes)
	}
	contains(t, "get nodes", nodes, "node-0", "Ready")
	// The namespaces a cluster starts with, undeletable.
	contains(t, "get namespaces", e.must("get", "namespaces"), "default", "kube-system", "kube-public", "kube-node-lease", "Active")
	e.refused("this namespace may not be deleted", "delete", "namespace", "kube-public")
	e.must("run", "web", "--image=nginx")
	e.must("wait", "--for=condition=Ready", "pod/web", "--timeout=180s")
	pods := e.must("get", "pods", "-o", "wide")
	if h := header(pods); h != "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES" {
		t.Errorf("get pods -o wide header %q:\n%s", h, pods)
	}
	contains(t, "get pods -o wide", pods, "web", "1/1", "Running", "node-")

	// Chunked lists page through every object.
	for i := range 3 {
		e.must("run", fmt.Sprintf("p%d", i), "--image=nginx")
	}
	names := e.must("get", "pods", "--chunk-size=1", "-o", "name")
	if got := strings.Fields(names); len(got) != 4 {
		t.Errorf("get pods --chunk-size=1: %q, want 4 pods", got)
	}

	// explain reads the served OpenAPI schemas.
	contains(t, "explain", e.must("explain", "pods.spec.containers"), "KIND:", "Pod", "FIELD:", "containers", "image")
	e.refused(`the server doesn't have a resource type "deployment`, "explain", "deploymentz")

	// Server-side dry run writes nothing.
	if out := e.must("run", "dry", "--image=nginx", "--dry-run=server", "-o", "name"); strings.TrimSpace(out) != "pod/dry" {
		t.Errorf("run --dry-run=server printed %q", out)
	}
	e.refused(`pods "dry" not found`, "get", "pod", "dry")
	contains(t, "label --dry-run=server", e.must("label", "pod", "web", "dry=run", "--dry-run=server"), "(server dry run)")
	if labels := e.must("get", "pod", "web", "-o", "jsonpath={.metadata.labels}"); strings.Contains(labels, "dry") {
		t.Errorf("a dry-run label stuck: %s", labels)
	}

	// A StatefulSet rolls out, restarts and rolls out again.
	manifest := filepath.Join(t.TempDir(), "db.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: app, image: nginx}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", manifest)
	contains(t, "rollout status", e.must("rollout", "status", "statefulset/db", "--timeout=300s"), "roll")
	e.must("rollout", "restart", "statefulset/db")
	contains(t, "rollout status after a restart", e.must("rollout", "status", "statefulset/db", "--timeout=300s"), "roll")
	sts := e.must("get", "statefulset", "db", "-o", "jsonpath={.status.updatedReplicas}/{.status.replicas} {.status.currentRevision}={.status.updateRevision}")
	counts, revs, _ := strings.Cut(sts, " ")
	cur, upd, _ := strings.Cut(revs, "=")
	if counts != "2/2" || cur != upd || cur == "" {
		t.Errorf("after the restart's rollout: %q", sts)
	}
	applySteps(t, e)
	deploymentSteps(t, e)
	gcSteps(t, e)
	eventsSteps(t, e)
	policySteps(t, e)
}

// embeddedOnly are the steps only the embedded cluster serves as asserted:
// its simulated containers' logs, its identities, and error bodies better
// than kube-apiserver's.
func embeddedOnly(t *testing.T, e *env) {
	contains(t, "logs", e.must("logs", "web"), "podsafe simulated container web of pod default/web started (attempt 0)")
	e.refused("simulated containers run no processes", "exec", "web", "--", "ls")
	e.refused("simulated containers run no processes", "attach", "web")
	e.refused("simulated containers run no processes", "port-forward", "pod/web", "18080:80")

	// A patch that does not apply names the object, the field and the op
	// (kube-apiserver says The  "" is invalid).
	e.refused(`The Pod "web" is invalid: metadata.labels.run: operation 0 of the JSON patch (test /metadata/labels/run) failed`,
		"patch", "pod", "web", "--type=json", "-p", `[{"op":"test","path":"/metadata/labels/run","value":"nope"}]`)

	// Identity: whoami, can-i, a context per component, impersonation.
	contains(t, "auth whoami", e.must("auth", "whoami"), "admin", "system:masters")
	if out := e.must("auth", "can-i", "delete", "pods", "--as=pet-controller"); strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i delete pods as pet-controller: %q", out)
	}
	contains(t, "get pods as scheduler", e.must("--context", "scheduler", "get", "pods"), "web")
	e.refused("PS-9", "--context", "pet-controller", "delete", "pod", "web", "--force", "--grace-period=0")
	e.refused(`cannot impersonate resource "users"`, "--context", "scheduler", "get", "pods", "--as=admin")
}
