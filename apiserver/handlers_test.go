package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestCreateDefaults checks the pod defaults and the fields the server owns.
func TestCreateDefaults(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	in := makePod("").obj()
	in.GenerateName = "web-"
	in.Status.Phase = corev1.PodRunning // ignored: status starts Pending
	in.UID = "chosen-by-client"         // ignored
	in.Spec.Containers[0].Image = "nginx"
	in.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	got, err := e.client(IdentityWorkload).CoreV1().Pods("default").Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Name, "web-") || len(got.Name) != len("web-")+5 {
		t.Errorf("generated name %q, want web- and 5 characters", got.Name)
	}
	if got.UID == "" || got.UID == "chosen-by-client" || got.ResourceVersion == "" || got.CreationTimestamp.IsZero() {
		t.Errorf("server-owned metadata not set: uid %q rv %q created %v", got.UID, got.ResourceVersion, got.CreationTimestamp)
	}
	type defaults struct {
		Phase         corev1.PodPhase
		QOS           corev1.PodQOSClass
		Restart       corev1.RestartPolicy
		Grace         int64
		Scheduler     string
		DNS           corev1.DNSPolicy
		Priority      int32
		Preemption    corev1.PreemptionPolicy
		PullPolicy    corev1.PullPolicy
		TermPath      string
		ProbePeriod   int32
		ProbeFailures int32
		ProbeScheme   corev1.URIScheme
	}
	c := got.Spec.Containers[0]
	gotD := defaults{got.Status.Phase, got.Status.QOSClass, got.Spec.RestartPolicy, *got.Spec.TerminationGracePeriodSeconds,
		got.Spec.SchedulerName, got.Spec.DNSPolicy, *got.Spec.Priority, *got.Spec.PreemptionPolicy, c.ImagePullPolicy,
		c.TerminationMessagePath, c.LivenessProbe.PeriodSeconds, c.LivenessProbe.FailureThreshold, c.LivenessProbe.HTTPGet.Scheme}
	want := defaults{corev1.PodPending, corev1.PodQOSBestEffort, corev1.RestartPolicyAlways, 30, "default-scheduler",
		corev1.DNSClusterFirst, 0, corev1.PreemptLowerPriority, corev1.PullAlways, "/dev/termination-log", 10, 3, corev1.URISchemeHTTP}
	if diff := cmp.Diff(want, gotD); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestListSelectors checks label and field selectors and the list shape.
func TestListSelectors(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("a").node("node-1").label("app", "x").phase(corev1.PodRunning).obj())
	e.seedPod(makePod("b").node("node-2").label("app", "x").obj())
	e.seedPod(makePod("c").label("app", "y").obj())
	other := makePod("d").obj()
	other.Namespace = "other"
	e.seedPod(other)
	c := e.client(IdentityWorkload)
	tests := []struct {
		ns, labels, fields string
		want               []string
	}{
		{"default", "", "", []string{"a", "b", "c"}},
		{"", "", "", []string{"a", "b", "c", "d"}},
		{"default", "app=x", "", []string{"a", "b"}},
		{"default", "app!=x", "", []string{"c"}},
		{"", "", "spec.nodeName=node-1", []string{"a"}},
		{"", "", "spec.nodeName=", []string{"c", "d"}},
		{"", "", "status.phase=Running", []string{"a"}},
		{"", "", "metadata.name=b", []string{"b"}},
		{"", "", "metadata.namespace=other", []string{"d"}},
		{"default", "app=x", "spec.nodeName!=node-1", []string{"b"}},
		{"default", "app=none", "", nil},
	}
	for _, tt := range tests {
		list, err := c.CoreV1().Pods(tt.ns).List(ctx, metav1.ListOptions{LabelSelector: tt.labels, FieldSelector: tt.fields})
		if err != nil {
			t.Fatalf("list %q %q: %v", tt.labels, tt.fields, err)
		}
		var got []string
		for _, p := range list.Items {
			got = append(got, p.Name)
		}
		sort.Strings(got)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("list ns=%q labels=%q fields=%q (-want +got):\n%s", tt.ns, tt.labels, tt.fields, diff)
		}
		if list.ResourceVersion == "" {
			t.Errorf("list without resourceVersion")
		}
	}
	// The raw list: kind, apiVersion, resourceVersion and items: [] when empty.
	resp := e.rawRequest(http.MethodGet, "/api/v1/namespaces/none/pods", IdentityWorkload, "", nil)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["kind"]) != `"PodList"` || string(raw["apiVersion"]) != `"v1"` || string(raw["items"]) != `[]` ||
		!strings.Contains(string(raw["metadata"]), `"resourceVersion"`) {
		t.Errorf("empty list = %s", body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

// TestStatusSubresource checks that the main resource ignores status and
// /status changes nothing else.
func TestStatusSubresource(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	pod := e.seedPod(makePod("p").node("node-1").obj())

	upd := pod.DeepCopy()
	upd.Labels = map[string]string{"a": "b"}
	upd.Status.Phase = corev1.PodFailed
	got, err := admin.CoreV1().Pods("default").Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["a"] != "b" || got.Status.Phase != corev1.PodPending {
		t.Errorf("update: labels %v phase %s, want the label and phase Pending", got.Labels, got.Status.Phase)
	}

	upd = got.DeepCopy()
	upd.Labels = map[string]string{"a": "c"}
	upd.Status.Phase = corev1.PodRunning
	got, err = e.client(KubeletIdentity("node-1")).CoreV1().Pods("default").UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["a"] != "b" || got.Status.Phase != corev1.PodRunning {
		t.Errorf("status update: labels %v phase %s, want label b and phase Running", got.Labels, got.Status.Phase)
	}

	// A terminal phase is final.
	got.Status.Phase = corev1.PodSucceeded
	if got, err = admin.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.Status.Phase = corev1.PodRunning
	if _, err := admin.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("Succeeded -> Running: %v, want 422", err)
	}
	// An unchanged write does not create a new version.
	again, err := admin.CoreV1().Pods("default").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || again.ResourceVersion != got.ResourceVersion {
		t.Errorf("no-op update: %v, rv %s -> %s", err, got.ResourceVersion, again.ResourceVersion)
	}
}

// TestPatchTypes checks merge, JSON and strategic merge patches, on the
// object and on its status.
func TestPatchTypes(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pod := makePod("p").node("node-1").obj()
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "d", Image: "busybox:1"})
	e.seedPod(pod)
	c := e.client(IdentityAdmin)
	pods := c.CoreV1().Pods("default")

	if _, err := pods.Patch(ctx, "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"m":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if _, err := pods.Patch(ctx, "p", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/annotations","value":{"j":"1"}}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("json patch: %v", err)
	}
	// Strategic merge patches merge containers by name.
	got, err := pods.Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"d","image":"busybox:2"}]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("strategic merge patch: %v", err)
	}
	if diff := cmp.Diff([]string{"busybox:1.36", "busybox:2"}, []string{got.Spec.Containers[0].Image, got.Spec.Containers[1].Image}); diff != "" {
		t.Errorf("images after strategic patch (-want +got):\n%s", diff)
	}
	if got.Labels["m"] != "1" || got.Annotations["j"] != "1" {
		t.Errorf("labels %v annotations %v", got.Labels, got.Annotations)
	}
	got, err = e.client(KubeletIdentity("node-1")).CoreV1().Pods("default").Patch(ctx, "p", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"m":"2"}},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`),
		metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("status patch: %v", err)
	}
	if got.Status.Phase != corev1.PodRunning || len(got.Status.Conditions) != 1 || got.Labels["m"] != "1" {
		t.Errorf("after status patch: phase %s conditions %v labels %v", got.Status.Phase, got.Status.Conditions, got.Labels)
	}
	if _, err := pods.Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"foo":1}}`), metav1.PatchOptions{FieldValidation: "Strict"}); !apierrors.IsBadRequest(err) ||
		!strings.Contains(err.Error(), `unknown field "spec.foo"`) {
		t.Errorf("strict patch with an unknown field: %v, want 400", err)
	}
	if _, err := pods.Patch(ctx, "missing", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch of a missing pod: %v, want 404", err)
	}
}

// TestPriorityAdmission checks PR-1 and PR-2.
func TestPriorityAdmission(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityAdmin)
	never := corev1.PreemptNever
	classes := []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: "meek"}, Value: 500, PreemptionPolicy: &never},
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Value: 7, GlobalDefault: true},
	}
	for _, pc := range classes {
		if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "second-default"}, Value: 1, GlobalDefault: true}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("second global default: %v, want 422", err)
	}
	_, err = c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Value: 2_000_000_000}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("user class above 1e9: %v, want 422", err)
	}
	type prio struct {
		Class    string
		Value    int32
		Policy   corev1.PreemptionPolicy
		Rejected bool
	}
	tests := []struct {
		class string
		value *int32
		want  prio
	}{
		{"high", nil, prio{"high", 1000, corev1.PreemptLowerPriority, false}},
		{"meek", nil, prio{"meek", 500, corev1.PreemptNever, false}},
		{"", nil, prio{"default", 7, corev1.PreemptLowerPriority, false}},
		{"unknown", nil, prio{Rejected: true}},
		{"high", func() *int32 { v := int32(5); return &v }(), prio{Rejected: true}},
	}
	for i, tt := range tests {
		pod := makePod("p" + string(rune('a'+i))).obj()
		pod.Spec.PriorityClassName = tt.class
		pod.Spec.Priority = tt.value
		got, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		var gotP prio
		if err != nil {
			if !apierrors.IsForbidden(err) {
				t.Errorf("class %q: %v, want 403", tt.class, err)
			}
			gotP.Rejected = true
		} else {
			gotP = prio{got.Spec.PriorityClassName, *got.Spec.Priority, *got.Spec.PreemptionPolicy, false}
		}
		if diff := cmp.Diff(tt.want, gotP); diff != "" {
			t.Errorf("class %q (-want +got):\n%s", tt.class, diff)
		}
	}
}

// TestScale checks the scale subresource of StatefulSets.
func TestScale(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityWorkload)
	three := int32(3)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
			Spec: makePod("x").obj().Spec}}}
	if _, err := c.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc, err := c.AppsV1().StatefulSets("default").GetScale(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 3 || sc.Status.Selector != "app=db" {
		t.Errorf("scale = %+v", sc)
	}
	sc.Spec.Replicas = 5
	if _, err := c.AppsV1().StatefulSets("default").UpdateScale(ctx, "db", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().StatefulSets("default").UpdateScale(ctx, "db", sc, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("scale update with a stale resourceVersion: %v, want 409", err)
	}
	if _, err := c.AppsV1().StatefulSets("default").Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
	final, err := c.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || *final.Spec.Replicas != 2 {
		t.Errorf("replicas after scale patch: %v %v", final, err)
	}
}

// TestEviction checks that eviction honours a PodDisruptionBudget: 429 when
// no disruption is allowed, a graceful deletion otherwise.
func TestEviction(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	e.seedPod(makePod("a").node("node-1").label("app", "x").phase(corev1.PodRunning).obj())
	e.seedPod(makePod("b").node("node-1").label("app", "x").phase(corev1.PodRunning).obj())
	pdb, err := admin.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return e.client(IdentityWorkload).CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	if err := evict("a"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction with no disruption allowed: %v, want 429", err)
	}
	pdb.Status.DisruptionsAllowed = 1
	if _, err := admin.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict("a"); err != nil {
		t.Fatalf("eviction with one disruption allowed: %v", err)
	}
	if p := e.storedPod("default", "a"); p == nil || p.DeletionTimestamp == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Errorf("evicted pod is not terminating with grace 30: %+v", p)
	}
	if err := evict("b"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("second eviction: %v, want 429", err)
	}
	got, err := admin.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Status.DisruptedPods["a"]; !ok || got.Status.DisruptionsAllowed != 0 {
		t.Errorf("budget after eviction: %+v", got.Status)
	}
}

// An eviction of a pod that is already terminating leaves its deletion
// pending (kube-apiserver's rule), so it is not a force deletion even when
// the pod's spec grace is 0: an ordinary client may send it.
func TestEvictionOfTerminatingPod(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("t").node("node-1").grace(0).phase(corev1.PodRunning).obj())
	if err := e.client(IdentityAdmin).CoreV1().Pods("default").Delete(ctx, "t", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](20)}); err != nil {
		t.Fatal(err)
	}
	err := e.client(IdentityWorkload).CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "default"}})
	if err != nil {
		t.Fatalf("eviction of a terminating pod: %v, want it accepted as pending", err)
	}
	if got := deletionStateOf(e.storedPod("default", "t")); got != (deletionState{true, testStart.Add(20 * time.Second), 20}) {
		t.Errorf("deletion state after a pending eviction: %+v, want unchanged", got)
	}
}

// TestConcurrentPatches checks the compare-and-swap loop: concurrent patches
// of one pod all land, none overwrites another.
func TestConcurrentPatches(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("p").obj())
	c := e.client(IdentityWorkload)
	const writers = 12
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"w%d":"x"}}}`, i)
			_, err := c.CoreV1().Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := len(e.storedPod("default", "p").Labels); got != writers {
		t.Errorf("%d labels after %d concurrent patches", got, writers)
	}
}

// TestConcurrentGracefulDeletes checks PS-3 under concurrency: whatever the
// order, the deadline ends at the shortest grace asked for.
func TestConcurrentGracefulDeletes(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("p").node("node-1").obj())
	c := e.client(IdentityWorkload)
	graces := []int64{40, 7, 25, 60, 12, 30, 9, 50}
	errs := make(chan error, len(graces))
	for _, g := range graces {
		go func() {
			errs <- c.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &g})
		}()
	}
	for range graces {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	got := deletionStateOf(e.storedPod("default", "p"))
	if diff := cmp.Diff(deletionState{true, testStart.Add(7 * time.Second), 7}, got); diff != "" {
		t.Errorf("deletion state (-want +got):\n%s", diff)
	}
}
