package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within %v", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterUpDataDir: a durable data directory belongs to one cluster up
// at a time, and to one membership. A second podsafe on it is told the pid
// of the first at once; after the first is killed (kill -9, no cleanup),
// starting it with other --members is refused naming the recorded members,
// and with its own it starts again.
func TestClusterUpDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	kc := filepath.Join(dir, "first.kubeconfig")
	first := exec.Command(os.Args[0], "cluster", "up", "--durable", "--data-dir", data, "--members", "1", "--nodes", "1", "--kubeconfig", kc)
	first.Env = append(os.Environ(), "PODSAFE_AS_MAIN=1")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			first.Process.Kill()
			first.Wait()
		}
	})
	waitFile(t, kc, 60*time.Second)

	ctx := context.Background()
	kc2 := filepath.Join(dir, "second.kubeconfig")
	start := time.Now()
	out, code := run(ctx, "cluster", "up", "--durable", "--data-dir", data, "--members", "1", "--nodes", "1", "--kubeconfig", kc2)
	want := fmt.Sprintf("is in use by pid %d", first.Process.Pid)
	if code != exitUsage || !strings.Contains(out, want) || !strings.Contains(out, "--data-dir "+data) {
		t.Errorf("second cluster up on a data dir in use: exit %d, output %q; want exit %d and %q", code, out, exitUsage, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %v", d)
	}

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killed = true

	for _, members := range []string{"3", "5"} {
		out, code = run(ctx, "cluster", "up", "--durable", "--data-dir", data, "--members", members, "--nodes", "1", "--kubeconfig", kc2)
		want = "--data-dir " + data + " holds a 1-member cluster (cp-0), not --members " + members + ": start it with --members 1"
		if code != exitUsage || !strings.Contains(out, want) {
			t.Errorf("cluster up --members %s on a 1-member data dir: exit %d, output %q; want exit %d and %q", members, code, out, exitUsage, want)
		}
	}

	// Its own membership starts it again: the refusals and the kill left
	// no lock behind.
	os.Remove(kc2)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan string, 1)
	go func() {
		out, code := run(runCtx, "cluster", "up", "--durable", "--data-dir", data, "--members", "1", "--nodes", "1", "--kubeconfig", kc2)
		done <- fmt.Sprintf("exit %d: %s", code, out)
	}()
	waitFile(t, kc2, 60*time.Second)
	cancel()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "exit 0:") {
			t.Errorf("cluster up on its own data dir: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cluster up did not stop")
	}
}

// TestBadClusterUpFlags: podsafe cluster up refuses the same counts.
func TestBadClusterUpFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kc")
	up := func(args ...string) []string { return append([]string{"cluster", "up", "--kubeconfig", kc}, args...) }
	expectUsage(t, []usageCase{
		{"negative nodes", up("--nodes", "-1"), "--nodes must be 0 or more, got -1"},
		{"zones 0", up("--zones", "0"), "--zones must be at least 1, got 0"},
		{"more zones than nodes", up("--zones", "4", "--nodes", "3"), "--zones must be between 1 and the number of nodes (--nodes 3), got 4"},
		{"members 0", up("--members", "0"), "--members must be 1, 3 or 5, got 0"},
		{"time-scale 0", up("--time-scale", "0"), "--time-scale must be at least 1 and finite, got 0"},
		{"data-dir without durable", up("--data-dir", t.TempDir()), "add --durable"},
	})
}

// TestClusterUpContexts: cluster up writes a kubeconfig (mode 0600) whose
// current context is admin's and which has a context per identity, each
// acting as its identity: whoami names it, and the pet controller's force
// deletion of a running pod meets the authority rule that refuses it
// (PS-9), which admin's context may make.
func TestClusterUpContexts(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "podsafe.kubeconfig")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		out, code := run(ctx, "cluster", "up", "--members", "1", "--nodes", "2", "--agents=false", "--kubeconfig", kc)
		done <- fmt.Sprintf("exit %d: %s", code, out)
	}()
	stopped := false
	stop := func() string {
		cancel()
		if stopped {
			return ""
		}
		stopped = true
		select {
		case out := <-done:
			return out
		case <-time.After(30 * time.Second):
			t.Fatal("cluster up did not stop")
		}
		return ""
	}
	t.Cleanup(func() { stop() })
	waitFile(t, kc, 60*time.Second)
	waitFile(t, strings.TrimSuffix(kc, ".kubeconfig")+"-ca.crt", 10*time.Second)

	if fi, err := os.Stat(kc); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode: %v, %v; want 0600", fi.Mode(), err)
	}
	raw, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != "podsafe" || raw.Contexts["podsafe"].AuthInfo != apiserver.IdentityAdmin {
		t.Errorf("current context %q (user %v); want podsafe as admin", raw.CurrentContext, raw.Contexts[raw.CurrentContext])
	}
	want := append(slices.Clone(cluster.Identities), apiserver.KubeletIdentity("node-0"), apiserver.KubeletIdentity("node-1"))
	for _, id := range want {
		c := raw.Contexts[id]
		if c == nil || c.AuthInfo != id || raw.AuthInfos[id] == nil || raw.AuthInfos[id].Token == "" {
			t.Errorf("no context of its own for %s: %+v", id, c)
		}
	}
	if len(raw.Contexts) != len(want)+1 {
		t.Errorf("%d contexts, want %d", len(raw.Contexts), len(want)+1)
	}

	clientFor := func(context string) kubernetes.Interface {
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for _, id := range []string{"podsafe", apiserver.IdentityPetController, apiserver.KubeletIdentity("node-1")} {
		rev, err := clientFor(id).AuthenticationV1().SelfSubjectReviews().Create(rctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		wantUser := id
		if id == "podsafe" {
			wantUser = apiserver.IdentityAdmin
		}
		if err != nil || rev.Status.UserInfo.Username != wantUser {
			t.Errorf("whoami --context %s: %v, %v; want %s", id, rev, err, wantUser)
		}
	}
	admin := clientFor("podsafe")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := admin.CoreV1().Pods("default").Create(rctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	err = clientFor(apiserver.IdentityPetController).CoreV1().Pods("default").Delete(rctx, "x", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PS-9") {
		t.Errorf("force delete --context pet-controller: %v; want 403 under PS-9", err)
	}
	if err := admin.CoreV1().Pods("default").Delete(rctx, "x", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Errorf("force delete as admin: %v", err)
	}

	out := stop()
	for _, line := range []string{
		"contexts: one per identity (admin, scheduler, node-controller, podgc, pet-controller, replicaset-controller, fencing-controller, workload, attachdetach-controller, disruption-controller, deployment-controller, garbage-collector, namespace-controller, kubelet:node-0, kubelet:node-1); the current one, podsafe, is admin",
		"--context pet-controller delete pod NAME --force --grace-period=0",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("cluster up does not say %q:\n%s", line, out)
		}
	}
	// The curl line reads admin's token, not another identity's.
	for _, line := range strings.Split(out, "\n") {
		cmdStart := strings.Index(line, "$(awk ")
		if cmdStart < 0 {
			continue
		}
		script := line[cmdStart+2 : strings.Index(line[cmdStart:], ")\"")+cmdStart]
		tok, err := exec.Command("sh", "-c", script).Output()
		if err != nil || strings.TrimSpace(string(tok)) != raw.AuthInfos[apiserver.IdentityAdmin].Token {
			t.Errorf("the curl line's %q does not read admin's token: %v", script, err)
		}
	}
	if strings.Contains(out, raw.AuthInfos[apiserver.IdentityPetController].Token) {
		t.Errorf("cluster up printed a token:\n%s", out)
	}
}
