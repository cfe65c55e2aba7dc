package record

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/history"
)

// fixtureStart is the recorder start the fixtures' times are relative to.
var fixtureStart = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// at returns the time of a fixture, s seconds after fixtureStart.
func at(s float64) int64 { return int64(math.Round(s * float64(time.Second))) }

func ptr(n int64) *int64 { return &n }

// fixture reads one audit event of testdata/audit.
func fixture(t *testing.T, name string) AuditEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "audit", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ParseAuditLine(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

const podUID = "3c9d6f0e-1a2b-4c3d-8e4f-5a6b7c8d9e0f"

// Each fixture is converted into the call podsafe's transport records for
// the same request.
func TestConvertAudit(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    history.APICall
	}{
		{"binding", history.APICall{Identity: "scheduler", Verb: "create", Resource: "pods", Subresource: "binding",
			Namespace: "default", Name: "web-0", Code: 201, Outcome: history.StatusOK,
			Invoke: at(1.25), Return: at(1.262417)}},
		{"delete_kubelet", history.APICall{Identity: "kubelet:node-1", Verb: "delete", Resource: "pods",
			Namespace: "default", Name: "web-0", Code: 200, Outcome: history.StatusOK, GracePeriodSeconds: ptr(0),
			ResourceVersion: "4711", UID: podUID, Invoke: at(35.0001), Return: at(35.0043)}},
		{"delete_graceful", history.APICall{Identity: "admin", Verb: "delete", Resource: "pods",
			Namespace: "default", Name: "web-0", Code: 200, Outcome: history.StatusOK, GracePeriodSeconds: ptr(30),
			ResourceVersion: "4690", UID: podUID, Invoke: at(4.1), Return: at(4.108)}},
		// No body: the query parameter is what the API server applied.
		{"delete_query", history.APICall{Identity: "podgc", Verb: "delete", Resource: "pods",
			Namespace: "default", Name: "web-2", Code: 200, Outcome: history.StatusOK, GracePeriodSeconds: ptr(5),
			ResourceVersion: "4802", UID: "5e4d3c2b-1a09-4f8e-8d7c-6b5a49382716", Invoke: at(40), Return: at(40.003)}},
		// A body without a grace period: the API server ignores the query
		// parameter and uses the pod's own.
		{"delete_no_grace", history.APICall{Identity: "node-controller", Verb: "delete", Resource: "pods",
			Namespace: "default", Name: "web-3", Code: 200, Outcome: history.StatusOK,
			ResourceVersion: "5120", UID: "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", Invoke: at(60), Return: at(60.002)}},
		{"eviction", history.APICall{Identity: "admin", Verb: "create", Resource: "pods", Subresource: "eviction",
			Namespace: "default", Name: "web-1", Code: 201, Outcome: history.StatusOK, GracePeriodSeconds: ptr(10),
			Invoke: at(20.5), Return: at(20.531)}},
		{"eviction_refused", history.APICall{Identity: "admin", Verb: "create", Resource: "pods", Subresource: "eviction",
			Namespace: "default", Name: "web-4", Code: 429, Outcome: history.StatusFail,
			Error:  "Cannot evict pod as it would violate the pod's disruption budget.",
			Invoke: at(21), Return: at(21.01)}},
		{"conflict", history.APICall{Identity: "pet-controller", Verb: "update", Group: "apps", Resource: "statefulsets",
			Subresource: "status", Namespace: "default", Name: "web", Code: 409, Outcome: history.StatusFail,
			Error:  `Operation cannot be fulfilled on statefulsets.apps "web": the object has been modified; please apply your changes to the latest version and try again`,
			Invoke: at(10), Return: at(10.0015)}},
		// A watch is recorded when its response started, as the transport
		// records it when the headers arrive.
		{"watch_started", history.APICall{Identity: "scheduler", Verb: "watch", Resource: "pods", Code: 200,
			Outcome: history.StatusOK, Invoke: at(0.5), Return: at(0.5009)}},
		// The name a field selector gives is not the path's.
		{"watch_named", history.APICall{Identity: "kubelet:node-1", Verb: "watch", Resource: "nodes", Code: 200,
			Outcome: history.StatusOK, Invoke: at(0.6), Return: at(0.6005)}},
		{"list", history.APICall{Identity: "admin", Verb: "list", Resource: "pods", Namespace: "default", Code: 200,
			Outcome: history.StatusOK, Invoke: at(30), Return: at(30.004)}},
		// A generated name is read from the response.
		{"create_generated", history.APICall{Identity: "replicaset-controller", Verb: "create", Resource: "pods",
			Namespace: "default", Name: "front-7d9f8c6b5-x2k9q", Code: 201, Outcome: history.StatusOK,
			ResourceVersion: "4400", UID: "61626364-6566-4768-a96a-6b6c6d6e6f70", Invoke: at(15), Return: at(15.006)}},
		{"node_status_patch", history.APICall{Identity: "kubelet:node-2", Verb: "patch", Resource: "nodes",
			Subresource: "status", Name: "node-2", Code: 200, Outcome: history.StatusOK, ResourceVersion: "5001",
			UID: "71727374-7576-4778-a97a-7b7c7d7e7f80", Invoke: at(50), Return: at(50.002)}},
		{"panic", history.APICall{Identity: "disruption-controller", Verb: "update", Resource: "pods",
			Namespace: "default", Name: "web-5", Code: 500, Outcome: history.StatusUnknown,
			Error:  "APIServer panic'd: runtime error: invalid memory address or nil pointer dereference",
			Invoke: at(55), Return: at(55.0007)}},
		{"version", history.APICall{Identity: "admin", Verb: "get", Path: "/version", Code: 200,
			Outcome: history.StatusOK, Invoke: at(0.01), Return: at(0.0103)}},
		{"deletecollection_failed", history.APICall{Identity: "user:podsafe:workload", Verb: "deletecollection",
			Resource: "pods", Namespace: "default", Code: 500, Outcome: history.StatusUnknown, GracePeriodSeconds: ptr(0),
			Error: "etcdserver: request timed out", Invoke: at(70), Return: at(77)}},
		// The API server authorized the impersonated user.
		{"impersonated", history.APICall{Identity: "podgc", Verb: "delete", Resource: "pods", Namespace: "default",
			Name: "web-6", Code: 200, Outcome: history.StatusOK, GracePeriodSeconds: ptr(0), ResourceVersion: "5300",
			UID: "81828384-8586-4788-a98a-8b8c8d8e8f90", Invoke: at(80), Return: at(80.001)}},
		// The handler wrote no response: the create may or may not have
		// happened.
		{"closed_early", history.APICall{Identity: "pet-controller", Verb: "create", Resource: "pods",
			Namespace: "default", Name: "web-7", Code: 200, Outcome: history.StatusUnknown,
			Error: "Connection closed early", Invoke: at(85), Return: at(115)}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			got, ok := ConvertAudit(fixture(t, tc.fixture), fixtureStart)
			if !ok {
				t.Fatal("not converted")
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ConvertAudit (-want +got):\n%s", d)
			}
		})
	}
}

// Only the final event of a request becomes a call.
func TestConvertAuditSkipsOtherStages(t *testing.T) {
	// A watch's ResponseComplete comes when its stream ends.
	if c, ok := ConvertAudit(fixture(t, "watch_complete"), fixtureStart); ok {
		t.Errorf("watch ResponseComplete converted: %+v", c)
	}
	for _, stage := range []string{StageRequestReceived, StageResponseStarted, "", "Bogus"} {
		ev := fixture(t, "binding")
		ev.Stage = stage
		if c, ok := ConvertAudit(ev, fixtureStart); ok {
			t.Errorf("binding at stage %q converted: %+v", stage, c)
		}
	}
	for _, sub := range []string{"log", "exec", "attach", "portforward", "proxy"} {
		ev := fixture(t, "list")
		ev.Verb, ev.ObjectRef.Name, ev.ObjectRef.Subresource = "get", "web-0", sub
		if _, ok := ConvertAudit(ev, fixtureStart); ok {
			t.Errorf("ResponseComplete of long-running pods/%s converted", sub)
		}
		ev.Stage = StageResponseStarted
		if _, ok := ConvertAudit(ev, fixtureStart); !ok {
			t.Errorf("ResponseStarted of long-running pods/%s not converted", sub)
		}
	}
}

// Malformed events are refused, never a panic.
func TestConvertAuditMalformed(t *testing.T) {
	ev := fixture(t, "binding")
	ev.RequestReceivedTimestamp, ev.StageTimestamp = time.Time{}, time.Time{}
	if _, ok := ConvertAudit(ev, fixtureStart); ok {
		t.Error("event without times converted")
	}
	ev = fixture(t, "binding")
	ev.Verb = ""
	if _, ok := ConvertAudit(ev, fixtureStart); ok {
		t.Error("event without verb converted")
	}
	// One time missing: the other stands in.
	ev = fixture(t, "binding")
	ev.RequestReceivedTimestamp = time.Time{}
	if c, ok := ConvertAudit(ev, fixtureStart); !ok || c.Invoke != c.Return || c.Return != at(1.262417) {
		t.Errorf("event without received time = %+v, %v", c, ok)
	}
	// No status: unknown outcome.
	ev = fixture(t, "binding")
	ev.ResponseStatus = nil
	if c, ok := ConvertAudit(ev, fixtureStart); !ok || c.Outcome != history.StatusUnknown || c.Code != 0 {
		t.Errorf("event without status = %+v, %v", c, ok)
	}
	// Bodies that do not decode cost only what they would have told.
	ev = fixture(t, "delete_kubelet")
	ev.RequestObject, ev.ResponseObject = []byte(`[1,2]`), []byte(`"x"`)
	if c, ok := ConvertAudit(ev, fixtureStart); !ok || c.GracePeriodSeconds != nil || c.UID != "" {
		t.Errorf("event with odd bodies = %+v, %v", c, ok)
	}
	ev = fixture(t, "delete_kubelet")
	ev.RequestURI = "%zz"
	if _, ok := ConvertAudit(ev, fixtureStart); !ok {
		t.Error("event with a bad URI not converted")
	}
	for _, line := range []string{``, `{`, `[]`, `{"kind":"Pod","apiVersion":"v1"}`, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","stageTimestamp":"yesterday"}`} {
		if _, err := ParseAuditLine([]byte(line)); err == nil {
			t.Errorf("ParseAuditLine(%q) succeeded", line)
		}
	}
}

// The transport's outcome classes, status by status.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		verb string
		code int
		want history.Status
	}{
		{"get", 200, history.StatusOK}, {"create", 201, history.StatusOK}, {"get", 304, history.StatusOK},
		{"create", 409, history.StatusFail}, {"get", 404, history.StatusFail}, {"create", 429, history.StatusFail},
		{"update", 503, history.StatusFail}, {"update", 500, history.StatusUnknown}, {"update", 504, history.StatusUnknown},
		{"deletecollection", 404, history.StatusUnknown}, {"deletecollection", 200, history.StatusOK},
	} {
		if got := outcomeOf(tc.verb, tc.code); got != tc.want {
			t.Errorf("outcomeOf(%s, %d) = %s, want %s", tc.verb, tc.code, got, tc.want)
		}
	}
}

// The name of a path, parsed as the transport parses it.
func TestNameInPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                                       "",
		"/api/v1/namespaces/default/pods":                    "",
		"/api/v1/watch/namespaces/default/pods/p-1":          "p-1",
		"/api/v1/namespaces/default/pods/p-1":                "p-1",
		"/apis/apps/v1/namespaces/ns/statefulsets":           "",
		"/apis/apps/v1/watch/namespaces/ns/statefulsets/web": "web",
		"/api/v1/nodes/node-1":                               "node-1",
		"/api/v1/namespaces/ns":                              "ns",
		"/api/v1/watch/namespaces/ns":                        "ns",
		"/api/v1/namespaces/ns/status":                       "ns",
		"/version":                                           "",
		"/api":                                               "",
		"/apis/apps/v1/watch":                                "",
		"/apis/apps":                                         "",
		"":                                                   "",
	} {
		if got := nameInPath(path); got != want {
			t.Errorf("nameInPath(%q) = %q, want %q", path, got, want)
		}
	}
}

// Own users are left to the transport; the map's entries win over the
// rules.
func TestIdentityMapConvert(t *testing.T) {
	m := NewIdentityMap()
	m.AddOwn("podsafe:admin", apiserver.IdentityAdmin)
	if c, ok := m.Convert(fixture(t, "eviction"), fixtureStart); ok {
		t.Errorf("own user's call converted: %+v", c)
	}
	// Impersonation by an own user: the transport recorded it.
	if c, ok := m.Convert(fixture(t, "impersonated"), fixtureStart); ok {
		t.Errorf("own user's impersonated call converted: %+v", c)
	}
	m.Add("podsafe:workload", apiserver.IdentityWorkload)
	c, ok := m.Convert(fixture(t, "deletecollection_failed"), fixtureStart)
	if !ok || c.Identity != apiserver.IdentityWorkload {
		t.Errorf("workload's call = %+v, %v", c, ok)
	}
	c, ok = m.Convert(fixture(t, "binding"), fixtureStart)
	if !ok || c.Identity != apiserver.IdentityScheduler {
		t.Errorf("scheduler's call = %+v, %v", c, ok)
	}
	if _, ok := m.Convert(fixture(t, "watch_complete"), fixtureStart); ok {
		t.Error("watch ResponseComplete converted")
	}
}

// RecorderStart is the recorder's time origin: an event at the wall
// time the recorder reports now converts to about rec.Now().
func TestRecorderStart(t *testing.T) {
	rec, err := history.Create(filepath.Join(t.TempDir(), "h.jsonl"), history.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	time.Sleep(20 * time.Millisecond)
	start := RecorderStart(rec)
	now := time.Now()
	ev := fixture(t, "binding")
	ev.RequestReceivedTimestamp, ev.StageTimestamp = now, now
	c, ok := ConvertAudit(ev, start)
	if !ok {
		t.Fatal("not converted")
	}
	if d := time.Duration(rec.Now().Nanoseconds() - c.Return); d < 0 || d > 50*time.Millisecond {
		t.Errorf("converted Return %s, recorder now %s", time.Duration(c.Return), rec.Now())
	}
}
