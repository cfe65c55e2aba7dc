package kubectlconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gcSteps drives namespaces and the garbage collector through kubectl:
// get ns shows phases; a ReplicaSet's pods go with it under
// --cascade=foreground and stay, without an owner reference, under
// --cascade=orphan; a deleted namespace is Terminating until its content is
// gone, then gone itself; kubectl run in a missing namespace meets
// upstream's refusal.
func gcSteps(t *testing.T, e *env) {
	ns := e.must("get", "ns")
	if h := header(ns); h != "NAME STATUS AGE" {
		t.Errorf("get ns header %q:\n%s", h, ns)
	}
	contains(t, "get ns", ns, "default", "Active")
	e.must("create", "namespace", "gc-demo")
	contains(t, "get ns gc-demo", e.must("get", "ns", "gc-demo"), "gc-demo", "Active")
	if fins := e.must("get", "ns", "gc-demo", "-o", "jsonpath={.spec.finalizers}"); !strings.Contains(fins, "kubernetes") {
		t.Errorf("a new namespace's spec.finalizers: %q, want kubernetes", fins)
	}

	replicaSet := func(name string) {
		t.Helper()
		manifest := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: `+name+`, namespace: gc-demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: `+name+`}}
  template:
    metadata: {labels: {app: `+name+`}}
    spec:
      containers: [{name: app, image: nginx}]
`), 0o644); err != nil {
			t.Fatal(err)
		}
		e.must("apply", "-f", manifest)
		e.eventually("2 pods of "+name, func() bool { return len(e.podNames(name)) == 2 })
	}

	// Foreground: kubectl waits for the set, which goes only after its
	// pods (they block it), terminated gracefully by their kubelets.
	replicaSet("fg")
	e.must("delete", "rs", "fg", "-n", "gc-demo", "--cascade=foreground", "--timeout=180s")
	e.refused(`replicasets.apps "fg" not found`, "get", "rs", "fg", "-n", "gc-demo")
	if left := e.podNames("fg"); len(left) != 0 {
		t.Errorf("pods left after a foreground deletion of their set: %q", left)
	}

	// Orphan: the set goes, its pods stay with no owner reference.
	replicaSet("orphan")
	e.must("delete", "rs", "orphan", "-n", "gc-demo", "--cascade=orphan", "--timeout=180s")
	e.refused(`replicasets.apps "orphan" not found`, "get", "rs", "orphan", "-n", "gc-demo")
	if left := e.podNames("orphan"); len(left) != 2 {
		t.Errorf("orphaned pods: %q, want 2", left)
	}
	if refs := e.must("get", "pods", "-n", "gc-demo", "-l", "app=orphan", "-o", "jsonpath={.items[*].metadata.ownerReferences}"); strings.TrimSpace(refs) != "" {
		t.Errorf("orphaned pods keep owner references: %s", refs)
	}

	// The namespace: Terminating while its content (the orphans) goes,
	// then gone.
	e.must("delete", "ns", "gc-demo", "--wait=false")
	contains(t, "get ns gc-demo while it is deleted", e.must("get", "ns", "gc-demo"), "Terminating")
	e.refused("unable to create new content in namespace gc-demo because it is being terminated",
		"run", "late", "--image=nginx", "-n", "gc-demo")
	e.eventually("namespace gc-demo gone", func() bool {
		_, err := e.kubectl("get", "ns", "gc-demo")
		return err != nil && strings.Contains(err.Error(), `namespaces "gc-demo" not found`)
	})
	if out := e.must("get", "pods", "-n", "gc-demo", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("pods left in a deleted namespace: %s", out)
	}

	e.refused(`namespaces "nosuch" not found`, "run", "x", "--image=nginx", "-n", "nosuch")
}

// podNames lists the pods of app in gc-demo.
func (e *env) podNames(app string) []string {
	e.t.Helper()
	return strings.Fields(e.must("get", "pods", "-n", "gc-demo", "-l", "app="+app, "-o", "name"))
}

// eventually polls cond every second for up to three minutes.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Second)
	}
}
