package kubectlconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// printsEventually runs kubectl until what it prints contains every one of want
// (components record Events asynchronously), failing after a minute.
func (e *env) printsEventually(t *testing.T, what string, want []string, args ...string) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		var err error
		out, err = e.kubectl(args...)
		missing := err != nil
		for _, w := range want {
			missing = missing || !strings.Contains(out, w)
		}
		if !missing {
			t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
			return out
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: after a minute kubectl %s printed (err %v):\n%s\nwant %q in it", what, strings.Join(args, " "), err, out, want)
			return out
		}
	}
}

// eventsSection is the Events table of kubectl describe's output, from
// its header line on.
func eventsSection(out string) string {
	_, events, ok := strings.Cut(out, "\nEvents:\n")
	if !ok {
		return ""
	}
	return events
}

// eventsSteps: the components' Events explain a pod. kubectl describe
// shows the scheduler's Scheduled and the kubelet's Pulled, Created and
// Started for the running pod web; a pod no node can hold shows the
// scheduler's FailedScheduling with its per-node reasons; kubectl get
// events lists them; a deleted pod's kubelet recorded Killing.
func eventsSteps(t *testing.T, e *env) {
	out := e.printsEventually(t, "describe pod web", []string{"Scheduled", "Pulled", "Created", "Started"}, "describe", "pod", "web")
	events := eventsSection(out)
	if h := header(strings.TrimLeft(events, " ")); h != "Type Reason Age From Message" {
		t.Errorf("describe pod web: Events header %q:\n%s", h, out)
	}
	contains(t, "describe pod web", events, "Successfully assigned default/web to node-", "default-scheduler", "kubelet", "Container started")

	manifest := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  containers: [{name: app, image: nginx, resources: {requests: {cpu: "1000"}}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", manifest)
	out = e.printsEventually(t, "describe pod huge", []string{"FailedScheduling", "0/2 nodes are available", "Insufficient cpu"}, "describe", "pod", "huge")
	contains(t, "describe pod huge", eventsSection(out), "Warning", "default-scheduler")

	evs := e.printsEventually(t, "get events", []string{"pod/web", "Scheduled", "pod/huge", "FailedScheduling"}, "get", "events")
	if h := header(evs); h != "LAST SEEN TYPE REASON OBJECT MESSAGE" {
		t.Errorf("get events header %q:\n%s", h, evs)
	}
	e.must("delete", "pod", "huge")

	e.must("run", "gone", "--image=nginx")
	e.must("wait", "--for=condition=Ready", "pod/gone", "--timeout=180s")
	e.must("delete", "pod", "gone")
	e.printsEventually(t, "events of a deleted pod", []string{"Killing", "Stopping container gone"},
		"get", "events", "--field-selector", "involvedObject.name=gone")
}
