package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/raftstore"
)

// kubectlTableAccept is the Accept header kubectl get sends.
const kubectlTableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// newClockedEnv is a test server whose store stamps creationTimestamp with
// the server's fake clock, as a cluster's members share one clock, so that
// ages are deterministic.
func newClockedEnv(t *testing.T) *testEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(testStart)
	cluster := raftstore.OpenTestCluster(t, 1, raftstore.WithConfig(func(c *raftstore.Config) {
		c.Indexes, c.Clock = StoreIndexes(), clk
	}))
	e := newTestEnvOn(t, cluster.Stores[0], func(c *Config) { c.Clock = clk })
	e.clock = clk
	return e
}

// getTable GETs path as kubectl get does and decodes the Table.
func (e *testEnv) getTable(path string) *metav1.Table {
	e.t.Helper()
	resp := e.tableRequest(path, kubectlTableAccept)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var tab metav1.Table
	if err := json.Unmarshal(body, &tab); err != nil {
		e.t.Fatalf("GET %s: decoding the Table: %v\n%s", path, err, body)
	}
	if tab.Kind != "Table" || tab.APIVersion != "meta.k8s.io/v1" {
		e.t.Fatalf("GET %s: got %s %s, want a meta.k8s.io/v1 Table", path, tab.APIVersion, tab.Kind)
	}
	return &tab
}

// tableRequest sends a GET with the given Accept header as admin.
func (e *testEnv) tableRequest(path, accept string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.http.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenOf(IdentityAdmin))
	req.Header.Set("Accept", accept)
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// columnNames lists a Table's column names, priority 1 ones marked "+".
func columnNames(tab *metav1.Table) []string {
	var out []string
	for _, c := range tab.ColumnDefinitions {
		n := c.Name
		if c.Priority > 0 {
			n = "+" + n
		}
		out = append(out, n)
	}
	return out
}

// cellsByName maps each row's first cell (the name) to its cells.
func cellsByName(tab *metav1.Table, nameColumn int) map[string][]any {
	out := map[string][]any{}
	for _, r := range tab.Rows {
		out[r.Cells[nameColumn].(string)] = r.Cells
	}
	return out
}

func TestTablePodStatuses(t *testing.T) {
	e := newClockedEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	finished := metav1.NewTime(testStart.Add(3*time.Minute + 30*time.Second))
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	terminated := func(reason string, code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}
	}
	statuses := map[string]corev1.PodStatus{
		"running": {Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, State: running}}},
		"crashloop": {Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 3,
			State:                waiting("CrashLoopBackOff"),
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: finished}}}}},
		"creating":  {Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: waiting("ContainerCreating")}}},
		"completed": {Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: terminated("Completed", 0)}}},
		"error":     {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: terminated("Error", 1)}}},
		"exitcode":  {Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: terminated("", 137)}}},
		"init": {Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "i1", State: terminated("Completed", 0)}, {Name: "i2", State: waiting("PodInitializing")}}},
		"init-crash": {Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "i1", State: waiting("CrashLoopBackOff")}}},
		"evicted": {Phase: corev1.PodFailed, Reason: "Evicted"},
		"pending": {Phase: corev1.PodPending},
	}
	for name, st := range statuses {
		pod := makePod(name).node("node-1").obj()
		if strings.HasPrefix(name, "init") {
			pod.Spec.InitContainers = []corev1.Container{{Name: "i1", Image: "busybox"}, {Name: "i2", Image: "busybox"}}
		}
		if name == "running" {
			pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
		}
		if name == "pending" {
			pod.Spec.NodeName = ""
		}
		created := e.seedPod(pod)
		created.Status = st
		if _, err := admin.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
	}
	// A bound pod deleted with a grace period stays, Terminating.
	e.seedPod(makePod("terminating").node("node-1").grace(30).phase(corev1.PodRunning).obj())
	if err := admin.CoreV1().Pods("default").Delete(ctx, "terminating", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(5 * time.Minute)

	tab := e.getTable("/api/v1/namespaces/default/pods")
	if diff := cmp.Diff([]string{"Name", "Ready", "Status", "Restarts", "Age", "+IP", "+Node", "+Nominated Node", "+Readiness Gates"}, columnNames(tab)); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	want := map[string][]any{
		"running":     {"running", "1/1", "Running", "0", "5m", "10.0.0.7", "node-1", "<none>", "0/1"},
		"crashloop":   {"crashloop", "0/1", "CrashLoopBackOff", "3 (90s ago)", "5m", "<none>", "node-1", "<none>", "<none>"},
		"creating":    {"creating", "0/1", "ContainerCreating", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"completed":   {"completed", "0/1", "Completed", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"error":       {"error", "0/1", "Error", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"exitcode":    {"exitcode", "0/1", "ExitCode:137", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"init":        {"init", "0/1", "Init:1/2", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"init-crash":  {"init-crash", "0/1", "Init:CrashLoopBackOff", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"evicted":     {"evicted", "0/1", "Evicted", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
		"pending":     {"pending", "0/1", "Pending", "0", "5m", "<none>", "<none>", "<none>", "<none>"},
		"terminating": {"terminating", "0/1", "Terminating", "0", "5m", "<none>", "node-1", "<none>", "<none>"},
	}
	if diff := cmp.Diff(want, cellsByName(tab, 0)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	for _, r := range tab.Rows {
		if r.Cells[0] == "completed" && (len(r.Conditions) != 1 || r.Conditions[0].Reason != "Succeeded") {
			t.Errorf("completed pod's row conditions = %+v, want Completed/Succeeded", r.Conditions)
		}
	}
	if tab.ResourceVersion == "" {
		t.Error("the Table has no resourceVersion")
	}

	// GET of one pod is a Table of one row, at the pod's resourceVersion.
	one := e.getTable("/api/v1/namespaces/default/pods/crashloop")
	pod, err := admin.CoreV1().Pods("default").Get(ctx, "crashloop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Rows) != 1 || one.Rows[0].Cells[2] != "CrashLoopBackOff" || one.ResourceVersion != pod.ResourceVersion {
		t.Errorf("GET one pod as Table: rows %+v at %s, want the crashloop row at %s", one.Rows, one.ResourceVersion, pod.ResourceVersion)
	}
}

func TestTableNodes(t *testing.T) {
	e := newClockedEnv(t)
	ready := makeNode("ready").condition(corev1.NodeReady, corev1.ConditionTrue).obj()
	ready.Labels = map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}
	ready.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Podsafe", KernelVersion: "6.1", Architecture: "amd64", ContainerRuntimeVersion: "sim://1"}
	ready.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "ready"}, {Type: corev1.NodeInternalIP, Address: "10.1.0.1"}}
	e.seedNode(ready)
	cordoned := makeNode("cordoned").condition(corev1.NodeReady, corev1.ConditionFalse).obj()
	cordoned.Spec.Unschedulable = true
	e.seedNode(cordoned)
	e.seedNode(makeNode("unknown").condition(corev1.NodeMemoryPressure, corev1.ConditionFalse).obj())
	e.clock.Step(90 * time.Minute)

	tab := e.getTable("/api/v1/nodes")
	wantCols := []string{"Name", "Status", "Roles", "Age", "Version", "+Internal-IP", "+External-IP", "+OS-Image", "+Kernel-Version", "+Container-Runtime"}
	if diff := cmp.Diff(wantCols, columnNames(tab)); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	want := map[string][]any{
		"ready":    {"ready", "Ready", "control-plane,worker", "90m", "v1.37.2", "10.1.0.1", "<none>", "Podsafe", "6.1 (amd64)", "sim://1"},
		"cordoned": {"cordoned", "NotReady,SchedulingDisabled", "<none>", "90m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		"unknown":  {"unknown", "Unknown", "<none>", "90m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
	}
	if diff := cmp.Diff(want, cellsByName(tab, 0)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	// Column definitions carry upstream's types, formats and descriptions.
	if c := tab.ColumnDefinitions[0]; c.Format != "name" || c.Type != "string" || c.Description == "" {
		t.Errorf("NAME column = %+v, want a string column of format name with a description", c)
	}
}

// TestTableColumnsOfEveryResource holds every served resource's Table to
// kube-apiserver's columns for its kind.
func TestTableColumnsOfEveryResource(t *testing.T) {
	e := newTestEnv(t)
	want := map[string][]string{
		"pods":                 {"Name", "Ready", "Status", "Restarts", "Age", "+IP", "+Node", "+Nominated Node", "+Readiness Gates"},
		"nodes":                {"Name", "Status", "Roles", "Age", "Version", "+Internal-IP", "+External-IP", "+OS-Image", "+Kernel-Version", "+Container-Runtime"},
		"namespaces":           {"Name", "Status", "Age"},
		"events":               {"Last Seen", "Type", "Reason", "Object", "+Subobject", "+Source", "Message", "+First Seen", "+Count", "+Name"},
		"services":             {"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "+Selector"},
		"leases":               {"Name", "Holder", "Age"},
		"priorityclasses":      {"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"},
		"poddisruptionbudgets": {"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"},
		"statefulsets":         {"Name", "Ready", "Age", "+Containers", "+Images"},
		"deployments":          {"Name", "Ready", "Up-to-date", "Available", "Age", "+Containers", "+Images", "+Selector"},
		"replicasets":          {"Name", "Desired", "Current", "Ready", "Age", "+Containers", "+Images", "+Selector"},
		"volumeattachments":    {"Name", "Attacher", "PV", "Node", "Attached", "Age"},
	}
	for gvr, res := range e.srv.reg.byGVR {
		prefix := "/api/v1"
		if gvr.Group != "" {
			prefix = "/apis/" + gvr.Group + "/" + gvr.Version
		}
		tab := e.getTable(prefix + "/" + gvr.Resource)
		w, ok := want[gvr.Resource]
		if !ok {
			w = []string{"Name", "Created At"}
		}
		if diff := cmp.Diff(w, columnNames(tab)); diff != "" {
			t.Errorf("%s (%s): columns (-want +got):\n%s", gvr, res.kind, diff)
		}
	}
}

func TestTableCellsOfOtherKinds(t *testing.T) {
	e := newClockedEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	never := corev1.PreemptNever
	if _, err := admin.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000, PreemptionPolicy: &never}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "p.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"},
		Reason: "Killing", Message: "Stopping container c ", Type: "Normal", Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(testStart), LastTimestamp: metav1.NewTime(testStart.Add(time.Minute)), Count: 2}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "p.2"}, Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p"},
		Reason: "Scheduled", Note: "Bound", Type: "Normal", Action: "Binding", ReportingController: "podsafe-scheduler",
		ReportingInstance: "podsafe-scheduler-1", EventTime: metav1.NewMicroTime(testStart)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(2 * time.Minute)
	for _, tt := range []struct {
		path string
		want []any
	}{
		{"/apis/scheduling.k8s.io/v1/priorityclasses/high", []any{"high", float64(1000), false, "2m", "Never"}},
		{"/apis/coordination.k8s.io/v1/namespaces/default/leases/l", []any{"l", "node-1", "2m"}},
		{"/api/v1/namespaces/default/events/p.1", []any{"60s", "Normal", "Killing", "pod/p", "", "kubelet, node-1", "Stopping container c", "2m", float64(2), "p.1"}},
		{"/apis/events.k8s.io/v1/namespaces/default/events/p.2", []any{"2m", "Normal", "Scheduled", "pod/p", "", "podsafe-scheduler, podsafe-scheduler-1", "Bound", "2m", float64(1), "p.2"}},
	} {
		tab := e.getTable(tt.path)
		if len(tab.Rows) != 1 {
			t.Fatalf("%s: %d rows, want 1", tt.path, len(tab.Rows))
		}
		if diff := cmp.Diff(tt.want, tab.Rows[0].Cells); diff != "" {
			t.Errorf("%s: cells (-want +got):\n%s", tt.path, diff)
		}
	}
}

func TestTableIncludeObject(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("p").obj())
	rowObject := func(query string) map[string]any {
		t.Helper()
		tab := e.getTable("/api/v1/namespaces/default/pods" + query)
		if len(tab.Rows) != 1 {
			t.Fatalf("%s: %d rows, want 1", query, len(tab.Rows))
		}
		if len(tab.Rows[0].Object.Raw) == 0 || string(tab.Rows[0].Object.Raw) == "null" {
			return nil
		}
		var m map[string]any
		if err := json.Unmarshal(tab.Rows[0].Object.Raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, query := range []string{"", "?includeObject=Metadata"} {
		m := rowObject(query)
		if m["kind"] != "PartialObjectMetadata" || m["apiVersion"] != "meta.k8s.io/v1" || m["spec"] != nil {
			t.Errorf("%q: row object = %v, want a PartialObjectMetadata without spec", query, m)
		}
		if md, _ := m["metadata"].(map[string]any); md["name"] != "p" || md["resourceVersion"] == "" {
			t.Errorf("%q: row object metadata = %v", query, m["metadata"])
		}
	}
	if m := rowObject("?includeObject=Object"); m["kind"] != "Pod" || m["spec"] == nil {
		t.Errorf("Object: row object = %v, want the whole Pod", m)
	}
	if m := rowObject("?includeObject=None"); m != nil {
		t.Errorf("None: row object = %v, want none", m)
	}

	resp := e.tableRequest("/api/v1/namespaces/default/pods?includeObject=Everything", kubectlTableAccept)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `Unable to convert to Table as requested: includeObject: Invalid value: \"Everything\"`) {
		t.Errorf("bad includeObject: %d %s, want 400 naming includeObject", resp.StatusCode, body)
	}
}

func TestTableNegotiation(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("p").obj())
	for _, tt := range []struct {
		accept, wantKind string
	}{
		{"", "PodList"},
		{"application/json", "PodList"},
		{"application/vnd.kubernetes.protobuf,application/json", "PodList"},
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io", "Table"},
		{"application/json, application/json;as=Table;v=v1;g=meta.k8s.io", "PodList"},
		{"application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", "PodList"},
		{"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", "PodList"},
	} {
		resp := e.tableRequest("/api/v1/namespaces/default/pods", tt.accept)
		var got metav1.TypeMeta
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if got.Kind != tt.wantKind {
			t.Errorf("Accept %q: got a %s, want a %s", tt.accept, got.Kind, tt.wantKind)
		}
	}
}

// TestTableWatch: kubectl get -w watches with the Table Accept header and
// prints each event's object as rows; the first event carries the columns.
func TestTableWatch(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("a").obj())
	rv := e.storeRevision()
	ctx := testCtx(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+"/api/v1/namespaces/default/pods?watch=true&resourceVersion=0", nil)
	req.Header.Set("Authorization", "Bearer "+tokenOf(IdentityAdmin))
	req.Header.Set("Accept", kubectlTableAccept)
	resp, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	e.seedPod(makePod("b").obj())
	dec := json.NewDecoder(resp.Body)
	for i, name := range []string{"a", "b"} {
		var ev struct {
			Type   string
			Object metav1.Table
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Type != "ADDED" || ev.Object.Kind != "Table" || len(ev.Object.Rows) != 1 || ev.Object.Rows[0].Cells[0] != name {
			t.Fatalf("event %d = %s %+v, want ADDED of a Table with the row of %s", i, ev.Type, ev.Object, name)
		}
		if got := len(ev.Object.ColumnDefinitions) > 0; got != (i == 0) {
			t.Errorf("event %d carries column definitions: %v, want %v", i, got, i == 0)
		}
		if ev.Object.ResourceVersion == "" {
			t.Errorf("event %d: the Table has no resourceVersion", i)
		}
	}
	_ = rv
}

func TestTableDefaultPrinter(t *testing.T) {
	p := printerFor(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	pod := makePod("w").obj()
	pod.CreationTimestamp = metav1.NewTime(testStart)
	cells, _ := p.cells(pod, testStart.Add(time.Hour))
	if diff := cmp.Diff([]any{"w", "2026-01-02T03:04:05Z"}, cells); diff != "" {
		t.Errorf("cells (-want +got):\n%s", diff)
	}
	if p.columns[1].Name != "Created At" || p.columns[1].Type != "date" {
		t.Errorf("columns = %+v, want kube-apiserver's default Name and Created At", p.columns)
	}
}
