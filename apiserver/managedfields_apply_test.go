package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/podsafe/podsafe/raftstore"
)

// podConfig is an apply configuration of pod "web" with labels and one
// container running image.
func podConfig(image string, labels map[string]string) *corev1ac.PodApplyConfiguration {
	return corev1ac.Pod("web", "default").WithLabels(labels).WithSpec(corev1ac.PodSpec().
		WithContainers(corev1ac.Container().WithName("app").WithImage(image)))
}

// entries describes managed fields as "manager operation subresource"
// lines, in order.
func entries(mf []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range mf {
		out = append(out, strings.TrimSpace(e.Manager+" "+string(e.Operation)+" "+e.Subresource))
	}
	return out
}

// ownedBy returns the fieldsV1 of manager's entry, or "" without one.
func ownedBy(mf []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) string {
	for _, e := range mf {
		if e.Manager == manager && e.Operation == op && e.FieldsV1 != nil {
			return string(e.FieldsV1.Raw)
		}
	}
	return ""
}

// getPod reads pod name of default.
func getPod(t *testing.T, pods typedcorev1.PodInterface, name string) *corev1.Pod {
	t.Helper()
	pod, err := pods.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return pod
}

// Apply creates the object, records an Apply entry, removes what the
// manager stops applying, refuses another manager's conflicting value
// with upstream's Status, and gives the field up to force.
func TestApplyLifecycle(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")

	created, err := pods.Apply(ctx, podConfig("nginx:1", map[string]string{"tier": "web", "team": "a"}),
		metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatalf("apply creating the pod: %v", err)
	}
	if created.UID == "" || created.Labels["tier"] != "web" || created.Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("apply created %+v", created)
	}
	// Defaults are filled in as on any create.
	if created.Spec.RestartPolicy != corev1.RestartPolicyAlways || created.Status.Phase != corev1.PodPending {
		t.Errorf("created pod not defaulted: restartPolicy %q, phase %q", created.Spec.RestartPolicy, created.Status.Phase)
	}
	if diff := cmp.Diff([]string{"alice Apply"}, entries(created.ManagedFields)); diff != "" {
		t.Fatalf("managed fields after the creating apply (-want +got):\n%s", diff)
	}
	mf := created.ManagedFields[0]
	// Stamped by the server's clock (scaled in a scaled cluster), as
	// creationTimestamp is.
	if mf.APIVersion != "v1" || mf.FieldsType != "FieldsV1" || mf.Time == nil || !mf.Time.Time.Equal(testStart.Truncate(time.Second)) {
		t.Errorf("apply entry %+v: want apiVersion v1, fieldsType FieldsV1 and the server's time %v", mf, testStart)
	}
	owned := ownedBy(created.ManagedFields, "alice", metav1.ManagedFieldsOperationApply)
	for _, f := range []string{`"f:tier"`, `"f:team"`, `"k:{\"name\":\"app\"}"`, `"f:image"`} {
		if !strings.Contains(owned, f) {
			t.Errorf("alice's fields %s lack %s", owned, f)
		}
	}
	// Defaulted fields nobody applied are owned by nobody.
	if strings.Contains(owned, "restartPolicy") {
		t.Errorf("alice owns the defaulted restartPolicy: %s", owned)
	}

	// The same manager leaving a label out removes it.
	again, err := pods.Apply(ctx, podConfig("nginx:1", map[string]string{"tier": "web"}), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if _, ok := again.Labels["team"]; ok {
		t.Errorf("label team, no longer applied, is still there: %v", again.Labels)
	}

	// An identical apply writes nothing: the managed fields' times are
	// kept, and with them the resourceVersion.
	same, err := pods.Apply(ctx, podConfig("nginx:1", map[string]string{"tier": "web"}), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil || same.ResourceVersion != again.ResourceVersion {
		t.Errorf("identical apply: %v, resourceVersion %s, want %s unchanged", err, same.ResourceVersion, again.ResourceVersion)
	}

	// Another manager applying a different value of alice's field is 409
	// with a FieldManagerConflict cause naming alice and the field.
	_, err = pods.Apply(ctx, corev1ac.Pod("web", "default").WithLabels(map[string]string{"tier": "db"}), metav1.ApplyOptions{FieldManager: "bob"})
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errorsAs(err, &status) {
		t.Fatalf("conflicting apply: %v, want 409", err)
	}
	st := status.Status()
	wantCauses := []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "alice"`, Field: ".metadata.labels.tier"}}
	if diff := cmp.Diff(wantCauses, st.Details.Causes); diff != "" || st.Reason != metav1.StatusReasonConflict {
		t.Errorf("conflict reason %s, causes (-want +got):\n%s", st.Reason, diff)
	}
	if !strings.Contains(st.Message, `Apply failed with 1 conflict: conflict with "alice": .metadata.labels.tier`) {
		t.Errorf("conflict message %q", st.Message)
	}
	if got := getPod(t, pods, "web"); got.Labels["tier"] != "web" {
		t.Errorf("the refused apply changed tier to %q", got.Labels["tier"])
	}
	// Applying the same value is no conflict: both own it.
	if _, err := pods.Apply(ctx, corev1ac.Pod("web", "default").WithLabels(map[string]string{"tier": "web"}), metav1.ApplyOptions{FieldManager: "carol"}); err != nil {
		t.Errorf("apply of an equal value: %v", err)
	}

	// Force takes the field from alice (and carol).
	forced, err := pods.Apply(ctx, corev1ac.Pod("web", "default").WithLabels(map[string]string{"tier": "db"}), metav1.ApplyOptions{FieldManager: "bob", Force: true})
	if err != nil || forced.Labels["tier"] != "db" {
		t.Fatalf("forced apply: %v, labels %v", err, forced.Labels)
	}
	if owned := ownedBy(forced.ManagedFields, "alice", metav1.ManagedFieldsOperationApply); strings.Contains(owned, "f:tier") {
		t.Errorf("alice still owns tier after bob forced it: %s", owned)
	}
	if owned := ownedBy(forced.ManagedFields, "bob", metav1.ManagedFieldsOperationApply); !strings.Contains(owned, "f:tier") {
		t.Errorf("bob does not own tier after forcing it: %s", owned)
	}
	// alice, no longer owning tier, leaving it out does not remove it.
	if after, err := pods.Apply(ctx, podConfig("nginx:1", nil), metav1.ApplyOptions{FieldManager: "alice"}); err != nil || after.Labels["tier"] != "db" {
		t.Errorf("alice's apply without tier: %v, labels %v", err, after.Labels)
	}
}

// errorsAs is errors.As for the APIStatus of a client error.
func errorsAs(err error, target *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*target = s
	}
	return ok
}

// An apply creating an object answers 201, an apply to it 200; an apply
// to the status of an object that does not exist is 404.
func TestApplyStatusCodes(t *testing.T) {
	e := newTestEnv(t)
	body := []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: raw\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: busybox\n")
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		resp := e.rawRequest(http.MethodPatch, "/api/v1/namespaces/default/pods/raw?fieldManager=raw", IdentityAdmin, mediaApplyPatch, body)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("apply %d: %d %s, want %d", i, resp.StatusCode, out, want)
		}
	}
	resp := e.rawRequest(http.MethodPatch, "/api/v1/namespaces/default/pods/absent/status?fieldManager=raw", IdentityAdmin, mediaApplyPatch,
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"absent"},"status":{"message":"x"}}`))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("apply to the status of a missing pod: %d, want 404", resp.StatusCode)
	}
}

// A bad apply gets one clear error saying what is wrong.
func TestApplyRefusals(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("p").obj())
	pod := func(extra string) []byte {
		return []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + extra)
	}
	for _, tc := range []struct {
		name, query, contentType string
		body                     []byte
		code                     int
		reason                   metav1.StatusReason
		message                  string
	}{
		{"not YAML", "fieldManager=m", mediaApplyPatch, []byte("metadata: {name: [p\n"), 400, metav1.StatusReasonBadRequest, "the apply configuration is not YAML"},
		{"not an object", "fieldManager=m", mediaApplyPatch, []byte("- a\n- b\n"), 400, metav1.StatusReasonBadRequest, "not a YAML object"},
		{"empty", "fieldManager=m", mediaApplyPatch, nil, 400, metav1.StatusReasonBadRequest, "the apply configuration is empty"},
		{"wrong kind", "fieldManager=m", mediaApplyPatch, []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: p\n"), 400, metav1.StatusReasonBadRequest,
			"invalid object type: apiVersion v1, kind Service: the apply configuration must have apiVersion v1 and kind Pod"},
		{"no kind", "fieldManager=m", mediaApplyPatch, []byte("metadata:\n  name: p\n"), 400, metav1.StatusReasonBadRequest, "invalid object type: no apiVersion and no kind"},
		{"missing fieldManager", "", mediaApplyPatch, pod(""), 422, metav1.StatusReasonInvalid, "fieldManager: Required value: is required for apply patch"},
		{"unknown field", "fieldManager=m", mediaApplyPatch, pod("spec:\n  colour: blue\n"), 400, metav1.StatusReasonBadRequest, ".spec.colour: field not declared in schema"},
		{"managedFields set", "fieldManager=m", mediaApplyPatch, pod("  managedFields:\n  - manager: x\n"), 400, metav1.StatusReasonBadRequest, "metadata.managedFields must be nil"},
		{"duplicate field", "fieldManager=m&fieldValidation=Strict", mediaApplyPatch, pod("  labels: {a: b}\n  labels: {c: d}\n"), 400, metav1.StatusReasonBadRequest, "error strict decoding patch"},
		{"other name", "fieldManager=m", mediaApplyPatch, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\n"), 400, metav1.StatusReasonBadRequest, "does not match the name on the URL"},
		{"bad force", "fieldManager=m&force=maybe", mediaApplyPatch, pod(""), 400, metav1.StatusReasonBadRequest, `force: invalid value "maybe"`},
		{"force on a merge patch", "force=true", mediaMergePatch, []byte(`{}`), 422, metav1.StatusReasonInvalid, "force: Forbidden: may not be specified for non-apply patch"},
		{"CBOR", "fieldManager=m", mediaApplyPatchCBOR, []byte{0xa0}, 415, metav1.StatusReasonUnsupportedMediaType, "server-side apply as CBOR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.rawRequest(http.MethodPatch, "/api/v1/namespaces/default/pods/p?"+tc.query, IdentityAdmin, tc.contentType, tc.body)
			defer resp.Body.Close()
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Errorf("got %d %s %q, want %d %s containing %q", resp.StatusCode, st.Reason, st.Message, tc.code, tc.reason, tc.message)
			}
		})
	}
}

// A dry-run apply answers what it would store and stores nothing, neither
// a creation nor a change.
func TestApplyDryRun(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	dry := metav1.ApplyOptions{FieldManager: "alice", DryRun: []string{metav1.DryRunAll}}
	got, err := pods.Apply(ctx, podConfig("nginx:1", map[string]string{"tier": "web"}), dry)
	if err != nil || got.Labels["tier"] != "web" || len(got.ManagedFields) != 1 {
		t.Fatalf("dry apply creating: %v, %+v", err, got)
	}
	if _, err := pods.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry apply created the pod: %v", err)
	}
	if _, err := pods.Apply(ctx, podConfig("nginx:1", map[string]string{"tier": "web"}), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
		t.Fatal(err)
	}
	before := e.podSnapshot()
	got, err = pods.Apply(ctx, podConfig("nginx:1", map[string]string{"tier": "db"}), dry)
	if err != nil || got.Labels["tier"] != "db" {
		t.Fatalf("dry apply changing: %v, %v", err, got.Labels)
	}
	if diff := cmp.Diff(before, e.podSnapshot()); diff != "" {
		t.Errorf("the dry apply wrote (-before +after):\n%s", diff)
	}
	if stored := getPod(t, pods, "web"); stored.Labels["tier"] != "web" {
		t.Errorf("stored tier %q after a dry apply", stored.Labels["tier"])
	}
}

// Applies run in the compare-and-swap loop: managers applying at once each
// merge into the object as the others left it, so no label is lost.
func TestApplyConcurrent(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	if _, err := pods.Apply(ctx, podConfig("nginx", nil), metav1.ApplyOptions{FieldManager: "base"}); err != nil {
		t.Fatal(err)
	}
	const managers = 8
	errs := make(chan error, managers)
	for i := range managers {
		go func() {
			name := fmt.Sprintf("m%d", i)
			_, err := pods.Apply(ctx, corev1ac.Pod("web", "default").WithLabels(map[string]string{name: "x"}), metav1.ApplyOptions{FieldManager: name})
			errs <- err
		}()
	}
	for range managers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	got := getPod(t, pods, "web")
	if len(got.Labels) != managers || len(got.ManagedFields) != managers+1 {
		t.Errorf("labels %v, managers %v: want %d of each (and base)", got.Labels, entries(got.ManagedFields), managers)
	}
}

// An apply is judged by the authority rules as the write it makes: the
// workload may not apply a pod's status (PS-8's rule of who reports it).
func TestApplyAuthority(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("p").node("node-1").obj())
	cfg := corev1ac.Pod("p", "default").WithStatus(corev1ac.PodStatus().WithMessage("mine"))
	workload := e.client(IdentityWorkload).CoreV1().Pods("default")
	if _, err := workload.ApplyStatus(ctx, cfg, metav1.ApplyOptions{FieldManager: "w"}); !apierrors.IsForbidden(err) {
		t.Errorf("the workload applying a pod's status: %v, want 403", err)
	}
	kubelet := e.client(KubeletIdentity("node-1")).CoreV1().Pods("default")
	got, err := kubelet.ApplyStatus(ctx, cfg, metav1.ApplyOptions{FieldManager: "kubelet"})
	if err != nil || got.Status.Message != "mine" {
		t.Fatalf("the pod's kubelet applying its status: %v", err)
	}
	// The creator (named by the test binary's User-Agent) keeps its
	// entry; the kubelet's is of the status subresource.
	if got := entries(got.ManagedFields); len(got) != 2 || !slices.Contains(got, "kubelet Apply status") {
		t.Errorf("entries after a status apply: %q, want the creator's and the kubelet's Apply of status", got)
	}
	if owned := ownedBy(got.ManagedFields, "kubelet", metav1.ManagedFieldsOperationApply); !strings.Contains(owned, `"f:message"`) {
		t.Errorf("the kubelet's status apply owns %s", owned)
	}
}

// phantomStore hides one key from reads while a create of it finds it there:
// an object another writer keeps deleting and creating again, as an apply
// that meets it sees, for ever.
type phantomStore struct {
	Store
	name    string
	creates atomic.Int32
}

func (s *phantomStore) Get(ctx context.Context, key raftstore.Key) (raftstore.Object, error) {
	if key.Name == s.name {
		return raftstore.Object{}, raftstore.ErrNotFound
	}
	return s.Store.Get(ctx, key)
}

func (s *phantomStore) Create(ctx context.Context, key raftstore.Key, data []byte) (raftstore.Object, error) {
	if key.Name != s.name {
		return s.Store.Create(ctx, key, data)
	}
	if s.creates.Add(1) > 100 {
		return raftstore.Object{}, errors.New("phantom store: the apply did not give up")
	}
	return raftstore.Object{}, raftstore.ErrExists
}

// An apply that keeps finding its object gone on update and there on create
// gives up after MaxConflictRetries creates with the update's 404, rather
// than going round for ever.
func TestApplyRetriesBounded(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 1)
	st := &phantomStore{name: "web"}
	e := newTestEnvOn(t, cluster.Stores[0], func(c *Config) {
		st.Store, c.Store = c.Store, st
		c.MaxConflictRetries = 3
	})
	ctx := testCtx(t)
	_, err := e.client(IdentityAdmin).CoreV1().Pods("default").Apply(ctx, podConfig("nginx", nil), metav1.ApplyOptions{FieldManager: "alice"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("apply of an object that is never there to update: %v, want 404", err)
	}
	if n := st.creates.Load(); n != 3 {
		t.Errorf("%d creates tried, want MaxConflictRetries = 3", n)
	}
}
