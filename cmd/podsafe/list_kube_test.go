package main

import (
	"context"
	"strings"
	"testing"
)

// TestListKube: `podsafe list --target kube` offers the faults the kube
// target can inject and says, in one line each, why the others are not
// offered: clocks of real binaries are not faked, and without network
// namespaces no link can be cut.
func TestListKube(t *testing.T) {
	out, code := run(context.Background(), "list", "--target", "kube", "--members", "3", "--network", "loopback")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	offered, missing, ok := strings.Cut(out, "Not available there:")
	if !ok {
		t.Fatalf("no list of unavailable faults:\n%s", out)
	}
	for _, f := range []string{"kill-member", "kill-leader", "kill-kubelet", "kill-scheduler", "pause-scheduler"} {
		if !strings.Contains(offered, "  "+f+" ") {
			t.Errorf("%s not offered on the kube target:\n%s", f, out)
		}
	}
	for f, why := range map[string]string{
		"clock-skew":     "will not fake it",
		"isolate-leader": "network namespaces",
		"partition-node": "network namespaces",
		"slow-leader":    "etcd applies on its own",
		"failpoint":      "podsafe's own control plane",
	} {
		line := ""
		for _, l := range strings.Split(missing, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), f+" ") {
				line = l
			}
		}
		if !strings.Contains(line, why) {
			t.Errorf("%s: %q, want it unavailable because %q", f, line, why)
		}
	}
	// podsafe owns the nodes: it can power them off (lose-node); its
	// fencing controller is there to crash only when it runs.
	if !strings.Contains(offered, "  lose-node ") {
		t.Errorf("lose-node not offered on the kube target:\n%s", out)
	}
	if !strings.Contains(missing, "kill-fencing") || !strings.Contains(missing, "--fencing") {
		t.Errorf("kill-fencing offered, or not said why not, without --fencing:\n%s", out)
	}
	out, code = run(context.Background(), "list", "--target", "kube", "--network", "loopback", "--fencing")
	if offered, _, _ := strings.Cut(out, "Not available there:"); code != 0 || !strings.Contains(offered, "  kill-fencing ") {
		t.Errorf("list --target kube --fencing: exit %d, kill-fencing not offered:\n%s", code, out)
	}
	if _, code := run(context.Background(), "list", "--target", "cloud"); code != exitUsage {
		t.Errorf("list --target cloud: exit %d, want %d", code, exitUsage)
	}
}

// TestListKubeconfig: on an existing cluster podsafe offers only the faults
// of what it owns, its nodes (and fencing controller), and says why not the
// others.
func TestListKubeconfig(t *testing.T) {
	out, code := run(context.Background(), "list", "--target", "kubeconfig", "--nodes", "3")
	offered, missing, ok := strings.Cut(out, "Not available there:")
	if code != 0 || !ok {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, f := range []string{"kill-kubelet", "pause-kubelet", "partition-node", "partition-node-node", "lose-node"} {
		if !strings.Contains(offered, "  "+f+" ") {
			t.Errorf("%s not offered on an existing cluster:\n%s", f, out)
		}
	}
	for _, f := range []string{"kill-member", "isolate-leader", "kill-scheduler", "pause-controller", "api-store"} {
		if strings.Contains(offered, "  "+f+" ") || !strings.Contains(missing, f) {
			t.Errorf("%s offered on an existing cluster, or not said why not:\n%s", f, out)
		}
	}
	if !strings.Contains(missing, "not its control plane") {
		t.Errorf("no reason given:\n%s", out)
	}
}
