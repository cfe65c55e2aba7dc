package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"github.com/podsafe/podsafe/history"
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
		{"check without history", []string{"check", dir}, exitUsage, "holds no history.jsonl (nor history.jsonl.gz)"},
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

// TestTestAndCheck runs the main job briefly, then re-checks its directory:
// the finished run keeps its history compressed, and the check of the
// compressed history gives the run's verdict and counts.
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
	if !strings.Contains(out, fmt.Sprintf("--rate %d", DefaultRate)) || !strings.Contains(out, fmt.Sprintf("at most %d ops/s", DefaultRate)) {
		t.Errorf("the output does not say the run's rate:\n%s", out)
	}
	latest := filepath.Join(store, "latest")
	for _, f := range []string{"history.jsonl.gz", "scenario.json", "results.json", "linearizability.html", "podsafe.log"} {
		if _, err := os.Stat(filepath.Join(latest, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(latest, "history.jsonl")); err == nil {
		t.Error("the plain history is still there after the run finished")
	}
	if sc := read(filepath.Join(latest, "scenario.json")); !strings.Contains(sc, fmt.Sprintf(`"rate": %d`, DefaultRate)) {
		t.Errorf("scenario.json does not record the rate:\n%s", sc)
	}
	if h := readHistory(t, latest); !strings.Contains(h, fmt.Sprintf(`"rate":"%d"`, DefaultRate)) {
		t.Errorf("the history's meta does not record the rate:\n%.500s", h)
	}
	again, code := run(ctx, "check", latest)
	if code != exitValid || !strings.Contains(again, "verdict: Ok") {
		t.Errorf("check: exit %d:\n%s", code, again)
	}
	if ops := opsLine(out); ops == "" || !strings.Contains(again, ops+" (counted from the history)") {
		t.Errorf("check of the compressed history counts otherwise than the run (%q):\n%s", ops, again)
	}
	if _, err := os.Stat(filepath.Join(latest, "history.jsonl")); err == nil {
		t.Error("check left a plain history beside the compressed one")
	}
	// report and serve's renderer read it as well.
	if out, code := run(ctx, "report", latest); code != 0 {
		t.Errorf("report of the compressed run: exit %d:\n%s", code, out)
	}
	if html := read(filepath.Join(latest, "report.html")); !strings.Contains(html, "register") || !strings.Contains(html, "cas ok") {
		t.Errorf("report.html rendered from the compressed history lacks its operations:\n%.2000s", html)
	}

	// A damaged compressed history is corrupt (65), named once.
	gz := filepath.Join(latest, "history.jsonl.gz")
	b, err := os.ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	bad, code := run(ctx, "check", latest)
	if code != exitCorrupt || !strings.Contains(bad, "history.jsonl.gz:") || !strings.Contains(bad, "compressed history is truncated or corrupt") {
		t.Errorf("check of a truncated compressed history: exit %d, want %d naming the file:\n%s", code, exitCorrupt, bad)
	}
}

// opsLine is the "ops: ok N, fail N, unknown N" of podsafe test's output.
func opsLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "ops: ") {
			return l
		}
	}
	return ""
}

// TestRateAndPlainHistory: --rate bounds the operations of the run (an
// upper bound only, which a slow machine meets too), --compress=false
// keeps the history plain, and --rate 0 is recorded as no bound.
func TestRateAndPlainHistory(t *testing.T) {
	store := t.TempDir()
	ctx := context.Background()
	out, code := run(ctx, "test", "--workload", "register", "--nemesis", "none", "--time-limit", "2s",
		"--seed", "12", "--rate", "25", "--compress=false", "--store", store)
	if code != exitValid {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	latest := filepath.Join(store, "latest")
	if _, err := os.Stat(filepath.Join(latest, "history.jsonl.gz")); err == nil {
		t.Error("--compress=false: the history was compressed")
	}
	h, err := history.Load(filepath.Join(latest, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// 2 s at 25 ops/s: at most 2×25+2 operations start, whatever the
	// machine.
	if n := len(h.Ops); n == 0 || n > 52 {
		t.Errorf("%d operations in 2 s at --rate 25, want 1 to 52", n)
	}
	if h.Meta.Extra[history.ExtraRate] != "25" {
		t.Errorf("meta extra = %v, want rate 25", h.Meta.Extra)
	}
	if !strings.Contains(out, "--rate 25") {
		t.Errorf("the rerun command lacks --rate 25:\n%s", out)
	}

	out, code = run(ctx, "test", "--workload", "register", "--nemesis", "none", "--time-limit", "1s",
		"--seed", "13", "--rate", "0", "--store", store)
	if code != exitValid || !strings.Contains(out, "no rate limit") || !strings.Contains(out, "--rate 0 ") {
		t.Errorf("--rate 0: exit %d, want a run without bound whose rerun says --rate 0:\n%s", code, out)
	}
	if h := readHistory(t, latest); strings.Contains(h, `"rate":`) {
		t.Errorf("a run without bound records a rate in its meta:\n%.500s", h)
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
	if want := "Authorization: Bearer $(awk '/^- name: admin$/ {u=1} u && /token:/ {print $2; exit}' " + kubeconfig + ")"; !strings.Contains(upOut, want) {
		t.Errorf("cluster up output lacks %q:\n%s", want, upOut)
	}
}
