package kubectlconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// applySteps drives server-side apply: apply creates and records kubectl's
// Apply entry, another manager changing the same field is refused naming
// kubectl, --force-conflicts takes the field, and diff --server-side shows
// what an apply would change without changing it.
func applySteps(t *testing.T, e *env) {
	dir := t.TempDir()
	manifest := func(name, tier string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Pod
metadata:
  name: ssa
  labels: {tier: `+tier+`}
spec:
  containers: [{name: app, image: nginx}]
`), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	web, db, cache := manifest("web.yaml", "web"), manifest("db.yaml", "db"), manifest("cache.yaml", "cache")

	contains(t, "apply --server-side", e.must("apply", "--server-side", "-f", web), "pod/ssa serverside-applied")
	managed := e.must("get", "pod", "ssa", "-o", "yaml", "--show-managed-fields")
	contains(t, "get --show-managed-fields", managed, "managedFields:", "manager: kubectl", "operation: Apply",
		"fieldsType: FieldsV1", "f:tier: {}")
	if out := e.must("get", "pod", "ssa", "-o", "yaml"); strings.Contains(out, "managedFields") {
		t.Errorf("get -o yaml shows managed fields without --show-managed-fields:\n%s", out)
	}

	// Another manager may not change kubectl's field without force.
	e.refused(`conflict with "kubectl": .metadata.labels.tier`, "apply", "--server-side", "--field-manager=other", "-f", db)
	if tier := e.must("get", "pod", "ssa", "-o", "jsonpath={.metadata.labels.tier}"); tier != "web" {
		t.Errorf("the refused apply changed tier to %q", tier)
	}
	e.must("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", db)
	if tier := e.must("get", "pod", "ssa", "-o", "jsonpath={.metadata.labels.tier}"); tier != "db" {
		t.Errorf("after --force-conflicts tier is %q, want db", tier)
	}
	owners := e.must("get", "pod", "ssa", "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}={.operation};{end}")
	contains(t, "managers after the forced apply", owners, "kubectl=Apply;", "other=Apply;")

	// diff --server-side shows the change a dry-run apply would make; it
	// exits 1 when there is one, as diff does.
	out, err := e.kubectl("diff", "--server-side", "--field-manager=other", "-f", cache)
	if err == nil || !strings.Contains(err.Error(), "exit 1") {
		t.Errorf("diff --server-side: %v, want exit 1 for a difference", err)
	}
	contains(t, "diff --server-side", out, "-    tier: db", "+    tier: cache")
	if tier := e.must("get", "pod", "ssa", "-o", "jsonpath={.metadata.labels.tier}"); tier != "db" {
		t.Errorf("diff changed tier to %q", tier)
	}
	e.must("delete", "pod", "ssa", "--wait=false")
}
