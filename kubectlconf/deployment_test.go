package kubectlconf

import (
	"regexp"
	"strings"
	"testing"
)

// deploymentSteps drives a Deployment through kubectl's rollout commands:
// create, rollout status, set image (revision 2), history, undo (revision
// 1 comes back as 3), restart (4), scale, and the get columns of the
// Deployment and its hashed ReplicaSets.
func deploymentSteps(t *testing.T, e *env) {
	const rolledOut = `deployment "web2" successfully rolled out`
	status := func(what string) {
		t.Helper()
		contains(t, "rollout status "+what, e.must("rollout", "status", "deployment/web2", "--timeout=300s"), rolledOut)
	}
	image := func() string {
		return e.must("get", "deployment", "web2", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	}
	contains(t, "explain deployment.spec.strategy", e.must("explain", "deployment.spec.strategy"),
		"KIND:", "Deployment", "FIELD:", "strategy", "rollingUpdate", "type")
	e.must("create", "deployment", "web2", "--image=nginx", "--replicas=2")
	status("after create")
	e.must("set", "image", "deployment/web2", "nginx=nginx:2")
	status("after set image")
	if got := revisions(e.must("rollout", "history", "deployment/web2")); got != "1 2" {
		t.Errorf("rollout history after set image: revisions %q, want 1 2", got)
	}
	contains(t, "rollout history --revision=2", e.must("rollout", "history", "deployment/web2", "--revision=2"), "nginx:2")
	contains(t, "rollout undo", e.must("rollout", "undo", "deployment/web2"), "rolled back")
	status("after undo")
	if got := image(); got != "nginx" {
		t.Errorf("image after undo: %q, want nginx", got)
	}
	if got := revisions(e.must("rollout", "history", "deployment/web2")); got != "2 3" {
		t.Errorf("rollout history after undo: revisions %q, want 2 3 (revision 1 is 3 now)", got)
	}
	contains(t, "rollout restart", e.must("rollout", "restart", "deployment/web2"), "restarted")
	status("after restart")
	e.must("scale", "deployment/web2", "--replicas=3")
	status("after scale")

	// The Deployment carries its new set's revision: the restart made 4.
	if rev := e.must("get", "deployment", "web2", "-o", `jsonpath={.metadata.annotations.deployment\.kubernetes\.io/revision}`); rev != "4" {
		t.Errorf("deployment revision annotation %q, want 4", rev)
	}
	deploy := e.must("get", "deployment", "web2")
	if h := header(deploy); h != "NAME READY UP-TO-DATE AVAILABLE AGE" {
		t.Errorf("get deployment header %q:\n%s", h, deploy)
	}
	if row := strings.Join(strings.Fields(strings.Split(deploy, "\n")[1]), " "); !strings.HasPrefix(row, "web2 3/3 3 3 ") {
		t.Errorf("get deployment row %q, want web2 3/3 3 3", row)
	}
	wide := e.must("get", "deployment", "web2", "-o", "wide")
	if h := header(wide); h != "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR" {
		t.Errorf("get deployment -o wide header %q:\n%s", h, wide)
	}
	contains(t, "get deployment -o wide", wide, "nginx", "app=web2")

	sets := e.must("get", "rs", "-l", "app=web2")
	if h := header(sets); h != "NAME DESIRED CURRENT READY AGE" {
		t.Errorf("get rs header %q:\n%s", h, sets)
	}
	// Three templates: nginx (revisions 1 and 3), nginx:2, the restart's.
	hashed := regexp.MustCompile(`^web2-[a-z0-9]+$`)
	var full, empty int
	for _, line := range strings.Split(strings.TrimSpace(sets), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || !hashed.MatchString(f[0]) {
			t.Errorf("get rs row %q: want web2-<pod-template-hash>", line)
			continue
		}
		switch strings.Join(f[1:4], " ") {
		case "3 3 3":
			full++
		case "0 0 0":
			empty++
		}
	}
	if full != 1 || empty != 2 {
		t.Errorf("get rs: %d sets at 3 and %d at 0, want 1 and 2:\n%s", full, empty, sets)
	}
	hashes := e.must("get", "rs", "-l", "app=web2", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.pod-template-hash} {end}`)
	for _, pair := range strings.Fields(hashes) {
		name, hash, _ := strings.Cut(pair, "=")
		if name != "web2-"+hash {
			t.Errorf("replica set %s carries pod-template-hash %q", name, hash)
		}
	}
}

// revisions are the revision numbers rollout history lists, in order.
func revisions(history string) string {
	var out []string
	for _, line := range strings.Split(history, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && regexp.MustCompile(`^[0-9]+$`).MatchString(f[0]) {
			out = append(out, f[0])
		}
	}
	return strings.Join(out, " ")
}
