package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// run executes the CLI in-process and returns its output and exit code.
func run(ctx context.Context, args ...string) (string, int) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return out.String(), 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			out.WriteString(ee.err.Error())
		}
		return out.String(), ee.code
	}
	return out.String() + err.Error(), exitUsage
}

// usageCase is a command line that must be refused before anything runs.
type usageCase struct {
	name string
	args []string
	want string
}

func expectUsage(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, code := run(context.Background(), tc.args...)
			if code != exitUsage || !strings.Contains(out, tc.want) {
				t.Errorf("podsafe %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, exitUsage, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("podsafe %s took %v: it ran before refusing", strings.Join(tc.args, " "), d)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("workload: register\ntimeLimit: 3s\n"), 0o644)
	corrupt := filepath.Join(dir, "corrupt")
	os.MkdirAll(corrupt, 0o755)
	os.WriteFile(filepath.Join(corrupt, "history.jsonl"), []byte(`{"kind":"meta","t":0,"seed":1}`+"\n"+`{"kind":"invoke",`+"\n"+`{"kind":"log","t":5,"msg":"x"}`+"\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"test", "--frobnicate"}, exitUsage, "unknown flag: --frobnicate"},
		{"delete --confirm without --force", []string{"delete", "pod", "web", "--confirm"}, exitUsage, "--confirm confirms a force deletion; it needs --force"},
		{"delete --force with a grace period", []string{"delete", "pod", "web", "--force", "--grace-period", "5"}, exitUsage, "cannot be combined with --grace-period 5"},
		{"delete without a kubeconfig", []string{"delete", "pod", "web", "--kubeconfig", "/nonexistent/kc"}, exitUsage, "reading kubeconfig /nonexistent/kc"},
		{"unknown workload", []string{"test", "--workload", "nope"}, exitUsage, `unknown workload "nope"; choose one of`},
		{"unknown nemesis", []string{"test", "--nemesis", "meteor"}, exitUsage, `unknown nemesis "meteor"`},
		{"two members", []string{"test", "--members", "2"}, exitUsage, "--members (scenario topology.members) must be 1, 3 or 5, got 2"},
		{"unknown bug", []string{"test", "--bug", "nope"}, exitUsage, `bug "nope" is unknown`},
		{"storage fence on kubeconfig", []string{"test", "--kubeconfig", "/dev/null", "--workload", "pets", "--fence-agents", "storage,power"}, exitUsage, `fence agent "storage" is not on the kubeconfig target, which has no podsafe storage server; choose from power, network`},
		{"kubeconfig target without a kubeconfig", []string{"test", "--target", "kubeconfig"}, exitUsage, "the kubeconfig target needs --kubeconfig FILE"},
		{"missing kubeconfig", []string{"test", "--kubeconfig", "/nonexistent/kc"}, exitUsage, "kubeconfig: stat /nonexistent/kc"},
		{"kubeconfig with the embedded target", []string{"test", "--target", "embedded", "--kubeconfig", "/nonexistent/kc"}, exitUsage, `a kubeconfig is for the target kubeconfig`},
		{"unknown fence agent on kube", []string{"test", "--target", "kube", "--workload", "pets", "--fence-agents", "ipmi"}, exitUsage, `fence agent "ipmi" is unknown; choose from power, network`},
		{"unknown scenario field", []string{"test", "--scenario", bad}, exitUsage, `unknown field "timeLimit"`},
		{"missing scenario", []string{"test", "--scenario", filepath.Join(dir, "none.yaml")}, exitUsage, "reading scenario"},
		{"check without history", []string{"check", dir}, exitUsage, "holds no history.jsonl"},
		{"corrupt history", []string{"check", corrupt}, exitCorrupt, "history.jsonl:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(context.Background(), tc.args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("podsafe %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	out, code := run(context.Background(), "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{"register", "isolate-leader", "halves", "partition", "store-linearizability", "stale-read"} {
		if !strings.Contains(out, want) {
			t.Errorf("podsafe list does not mention %q:\n%s", want, out)
		}
	}
}

// TestTestAndCheck runs the main job briefly, then re-checks its directory.
func TestTestAndCheck(t *testing.T) {
	store := t.TempDir()
	ctx := context.Background()
	out, code := run(ctx, "test", "--workload", "register", "--nemesis", "partition", "--nemesis-interval", "500ms",
		"--time-limit", "3s", "--seed", "11", "--store", store)
	if code != exitValid {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "rerun: podsafe test --workload register --nemesis partition") || !strings.Contains(out, "--seed 11") {
		t.Errorf("no rerun command in:\n%s", out)
	}
	latest := filepath.Join(store, "latest")
	for _, f := range []string{"history.jsonl", "scenario.json", "results.json", "linearizability.html", "podsafe.log"} {
		if _, err := os.Stat(filepath.Join(latest, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	out, code = run(ctx, "check", latest)
	if code != exitValid || !strings.Contains(out, "verdict: Ok") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
}

func TestClusterUp(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kc")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var upOut string
	go func() {
		out, code := run(ctx, "cluster", "up", "--members", "3", "--nodes", "2", "--kubeconfig", kubeconfig)
		upOut = out
		done <- code
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(kubeconfig); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no kubeconfig written")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the file is written whole, then the listener serves
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Errorf("got %d nodes, want 2", len(nodes.Items))
	}

	// PS-16: a force deletion warns, and happens only with --confirm.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodes.Items[0].Name, Containers: []corev1.Container{{Name: "app", Image: "sim"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code := run(ctx, "delete", "pod", "web", "--force", "--kubeconfig", kubeconfig)
	if code != exitUsage || !strings.Contains(out, "may keep running") || !strings.Contains(out, "needs --confirm") {
		t.Errorf("force delete without --confirm: exit %d:\n%s", code, out)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod is gone after an unconfirmed force deletion: %v", err)
	}
	out, code = run(ctx, "delete", "pod", "web", "--force", "--confirm", "--kubeconfig", kubeconfig)
	if code != exitValid || !strings.Contains(out, "may keep running") || !strings.Contains(out, "force deleted") {
		t.Errorf("force delete with --confirm: exit %d:\n%s", code, out)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod survived a confirmed force deletion: %v", err)
	}
	if out, code := run(ctx, "delete", "pod", "web", "--kubeconfig", kubeconfig); code != exitInvalid || !strings.Contains(out, "not found") {
		t.Errorf("deleting a missing pod: exit %d:\n%s", code, out)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("cluster up exited %d after cancel", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cluster up did not stop")
	}
	// The admin token stays in the kubeconfig; the output says how to read
	// it from there.
	if cfg.BearerToken == "" || strings.Contains(upOut, cfg.BearerToken) {
		t.Errorf("cluster up printed the admin token:\n%s", upOut)
	}
	if want := "Authorization: Bearer $(awk '/token:/ {print $2}' " + kubeconfig + ")"; !strings.Contains(upOut, want) {
		t.Errorf("cluster up output lacks %q:\n%s", want, upOut)
	}
}
