package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// canI asks the server, as cs, whether it may make a request with ra.
func canI(ctx context.Context, t *testing.T, cs kubernetes.Interface, ra authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	t.Helper()
	rev, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectAccessReview %+v: %v", ra, err)
	}
	return rev.Status
}

// realityCase is one request of TestCanIEqualsReality: setup (as admin)
// prepares its objects, named after name, and do makes the request.
type realityCase struct {
	what  string
	attrs func(name string) authorizationv1.ResourceAttributes
	setup func(e *testEnv, name string)
	do    func(ctx context.Context, cs kubernetes.Interface, name string) error
}

// podAttrs are the attributes of verb on pod name (subresource sub).
func podAttrs(verb, sub string) func(string) authorizationv1.ResourceAttributes {
	return func(name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: "default", Verb: verb, Resource: "pods", Subresource: sub, Name: name}
	}
}

// seedPodAs returns a setup seeding pod name bound to node (or not) in phase.
func seedPodAs(node string, phase corev1.PodPhase) func(*testEnv, string) {
	return func(e *testEnv, name string) {
		e.seedPod(makePod(name).node(node).phase(phase).obj())
	}
}

// realityCases are requests whose outcome depends on the identity, the
// object and its node: every write of the write table, and the per-object
// rules of force deletion (PS-9), pod status (LC-2), binding (LC-3), the
// node restriction (PS-1), heart-beat leases (PS-13), the fence token
// (PS-14) and attachments (PS-15).
var realityCases = []realityCase{
	{what: "get a pod", attrs: podAttrs(VerbGet, ""), setup: seedPodAs("", ""),
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err
		}},
	{what: "create a pod", attrs: podAttrs(VerbCreate, ""),
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().Pods("default").Create(ctx, makePod(name).obj(), metav1.CreateOptions{})
			return err
		}},
	{what: "delete a running pod of node-1", attrs: podAttrs(VerbDelete, ""), setup: seedPodAs("node-1", corev1.PodRunning), do: deletePod},
	{what: "delete a running pod of node-2", attrs: podAttrs(VerbDelete, ""), setup: seedPodAs("node-2", corev1.PodRunning), do: deletePod},
	{what: "delete an unbound pod", attrs: podAttrs(VerbDelete, ""), setup: seedPodAs("", ""), do: deletePod},
	{what: "delete a succeeded pod of node-1 (at once)", attrs: podAttrs(VerbDelete, ""), setup: seedPodAs("node-1", corev1.PodSucceeded), do: deletePod},
	{what: "add a condition to the status of a pod of node-1", attrs: podAttrs(VerbUpdate, subStatus), setup: seedPodAs("node-1", corev1.PodRunning),
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			pod, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: "podsafe.io/Test", Status: corev1.ConditionTrue})
			_, err = cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			return err
		}},
	{what: "bind a pod to node-1", attrs: podAttrs(VerbCreate, subBinding), setup: seedPodAs("", ""),
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			return cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
				Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
		}},
	{what: "evict a running pod of node-1", attrs: podAttrs(VerbCreate, subEviction), setup: seedPodAs("node-1", corev1.PodRunning),
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			return cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
		}},
	{what: "write node-1 back unchanged",
		attrs: func(string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbUpdate, Resource: "nodes", Name: "node-1"}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, _ string) error {
			node, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
			if err == nil {
				_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			}
			return err
		}},
	{what: "write the status of node-2 back unchanged",
		attrs: func(string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbUpdate, Resource: "nodes", Subresource: subStatus, Name: "node-2"}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, _ string) error {
			node, err := cs.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
			if err == nil {
				_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			}
			return err
		}},
	{what: "create a node",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbCreate, Resource: "nodes", Name: name}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().Nodes().Create(ctx, makeNode(name).obj(), metav1.CreateOptions{})
			return err
		}},
	{what: "delete a node",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbDelete, Resource: "nodes", Name: name}
		},
		setup: func(e *testEnv, name string) { e.seedNode(makeNode(name).obj()) },
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			return cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		}},
	{what: "create node-1's heart-beat lease",
		attrs: func(string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Namespace: KubeLeaseNamespace, Verb: VerbCreate, Group: "coordination.k8s.io", Resource: "leases", Name: "node-1"}
		},
		setup: func(e *testEnv, _ string) {
			err := e.client(IdentityAdmin).CoordinationV1().Leases(KubeLeaseNamespace).Delete(testCtx(e.t), "node-1", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				e.t.Fatal(err)
			}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, _ string) error {
			_, err := cs.CoordinationV1().Leases(KubeLeaseNamespace).Create(ctx,
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: KubeLeaseNamespace}}, metav1.CreateOptions{})
			return err
		}},
	{what: "create a lease in default",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbCreate, Group: "coordination.k8s.io", Resource: "leases", Name: name}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoordinationV1().Leases("default").Create(ctx,
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, metav1.CreateOptions{})
			return err
		}},
	{what: "write the fence token lease back unchanged",
		attrs: func(string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Namespace: FenceTokenLeaseNamespace, Verb: VerbUpdate, Group: "coordination.k8s.io", Resource: "leases", Name: FenceTokenLeaseName}
		},
		setup: func(e *testEnv, _ string) {
			_, err := e.client(IdentityAdmin).CoordinationV1().Leases(FenceTokenLeaseNamespace).Create(testCtx(e.t),
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: FenceTokenLeaseName, Namespace: FenceTokenLeaseNamespace}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				e.t.Fatal(err)
			}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, _ string) error {
			l, err := cs.CoordinationV1().Leases(FenceTokenLeaseNamespace).Get(ctx, FenceTokenLeaseName, metav1.GetOptions{})
			if err == nil {
				_, err = cs.CoordinationV1().Leases(FenceTokenLeaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
			}
			return err
		}},
	{what: "attach a volume to node-1",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbCreate, Group: "storage.k8s.io", Resource: "volumeattachments", Name: name}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.StorageV1().VolumeAttachments().Create(ctx, volumeAttachment(name, "node-1"), metav1.CreateOptions{})
			return err
		}},
	{what: "detach a volume from node-1 (not fenced)",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbDelete, Group: "storage.k8s.io", Resource: "volumeattachments", Name: name}
		},
		setup: func(e *testEnv, name string) {
			if _, err := e.client(IdentityAdmin).StorageV1().VolumeAttachments().Create(testCtx(e.t), volumeAttachment(name, "node-1"), metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			return cs.StorageV1().VolumeAttachments().Delete(ctx, name, metav1.DeleteOptions{})
		}},
	{what: "detach a volume from fenced node-3",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbDelete, Group: "storage.k8s.io", Resource: "volumeattachments", Name: name}
		},
		setup: func(e *testEnv, name string) {
			if _, err := e.client(IdentityAdmin).StorageV1().VolumeAttachments().Create(testCtx(e.t), volumeAttachment(name, "node-3"), metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			return cs.StorageV1().VolumeAttachments().Delete(ctx, name, metav1.DeleteOptions{})
		}},
	{what: "create a namespace",
		attrs: func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Verb: VerbCreate, Resource: "namespaces", Name: name}
		},
		do: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		}},
}

func deletePod(ctx context.Context, cs kubernetes.Interface, name string) error {
	return cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
}

func volumeAttachment(name, node string) *storagev1.VolumeAttachment {
	pv := "pv-" + name
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "podsafe.io/storage", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
}

// TestCanIEqualsReality: for every identity and every request of
// realityCases, what kubectl auth can-i answers (asked with the identity's
// own token, and asked by admin impersonating it) is what then happens when
// the identity makes the request: allowed exactly when the request is not
// refused with 403. A request refused for any other reason fails the test.
func TestCanIEqualsReality(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	for _, n := range []string{"node-1", "node-2"} {
		e.seedNode(makeNode(n).condition(corev1.NodeReady, corev1.ConditionTrue).obj())
	}
	e.seedNode(makeNode("node-3").condition(FencedCondition, corev1.ConditionTrue).obj())
	allowedBy := map[string][]string{}
	for i, tc := range realityCases {
		for _, id := range testIdentities {
			name := fmt.Sprintf("c%d-%s", i, strings.ReplaceAll(id, ":", "-"))
			if tc.setup != nil {
				tc.setup(e, name)
			}
			ra := tc.attrs(name)
			own := canI(ctx, t, e.client(id), ra)
			if id != IdentityAdmin {
				as := canI(ctx, t, e.impersonating(IdentityAdmin, rest.ImpersonationConfig{UserName: id}), ra)
				if diff := cmp.Diff(own, as); diff != "" {
					t.Errorf("%s: can-i as %s and as admin --as=%s differ (-own +impersonated):\n%s", tc.what, id, id, diff)
				}
			}
			err := tc.do(ctx, e.client(id), name)
			if err != nil && !apierrors.IsForbidden(err) {
				t.Fatalf("%s as %s: %v (neither allowed nor refused by a rule)", tc.what, id, err)
			}
			if did := err == nil; did != own.Allowed {
				t.Errorf("%s as %s: can-i answered allowed=%v (%s), the request: %v", tc.what, id, own.Allowed, own.Reason, err)
			}
			if own.Allowed == own.Denied {
				t.Errorf("%s as %s: allowed=%v and denied=%v", tc.what, id, own.Allowed, own.Denied)
			}
			if err != nil && !strings.Contains(err.Error(), own.Reason) {
				t.Errorf("%s as %s: can-i's reason %q is not the refusal's: %v", tc.what, id, own.Reason, err)
			}
			if own.Allowed {
				allowedBy[tc.what] = append(allowedBy[tc.what], id)
			}
		}
	}
	// The cases discriminate: each is allowed to admin and to some but not
	// every other identity, or to every one (reads).
	for _, tc := range realityCases {
		t.Logf("%s: allowed to %s", tc.what, strings.Join(allowedBy[tc.what], ", "))
	}
	for what, want := range map[string][]string{
		"delete a running pod of node-1":           {IdentityAdmin, IdentityScheduler, IdentityNodeController, IdentityPodGC, IdentityPetController, IdentityReplicaSetController, IdentityFencingController, IdentityWorkload, KubeletIdentity("node-1")},
		"create node-1's heart-beat lease":         {IdentityAdmin, KubeletIdentity("node-1")},
		"bind a pod to node-1":                     {IdentityAdmin, IdentityScheduler},
		"detach a volume from node-1 (not fenced)": {IdentityAdmin},
		"detach a volume from fenced node-3":       {IdentityAdmin, IdentityFencingController},
	} {
		if diff := cmp.Diff(want, allowedBy[what]); diff != "" {
			t.Errorf("%s allowed to (-want +got):\n%s", what, diff)
		}
	}
}

// TestAccessReview: answers without an object name, as kubectl auth can-i
// VERB RESOURCE asks: the write table decides, impersonation is admin's,
// wildcards need every verb and resource, and what the server does not
// serve is neither allowed nor denied.
func TestAccessReview(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	tests := []struct {
		identity string
		ra       authorizationv1.ResourceAttributes
		allowed  bool
		reason   string
	}{
		{IdentityPetController, authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbDelete, Resource: "pods"}, true, ""},
		{IdentityPetController, authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbCreate, Resource: "pods", Subresource: subBinding}, false,
			"LC-3: pet-controller may not create pods/binding in namespace default; its component makes no such write"},
		{IdentityPodGC, authorizationv1.ResourceAttributes{Verb: VerbList, Resource: "pods"}, true, ""},
		{IdentityWorkload, authorizationv1.ResourceAttributes{Verb: VerbUpdate, Resource: "nodes"}, false, "PS-13: workload may not update nodes"},
		{KubeletIdentity("node-1"), authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbDelete, Resource: "pods"}, true, ""},
		{KubeletIdentity("node-1"), authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbCreate, Resource: "pods"}, false, "PS-1: kubelet:node-1 may not create pods"},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}, true, ""},
		{IdentityWorkload, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "*", Resource: "pods"}, true, ""},
		{IdentityScheduler, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "*", Resource: "pods"}, false, "PS-2: scheduler may not create pods"},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Verb: VerbImpersonate, Resource: "users", Name: IdentityPetController}, true, ""},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Verb: VerbImpersonate, Resource: "users", Name: "system:node:node-2"}, true, ""},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Verb: VerbImpersonate, Resource: "users", Name: "mallory"}, false, `podsafe knows no identity "mallory"`},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Verb: VerbImpersonate, Group: "authentication.k8s.io", Resource: "uids"}, false, "no UID"},
		{IdentityScheduler, authorizationv1.ResourceAttributes{Verb: VerbImpersonate, Resource: "users"}, false, "only admin acts as another identity"},
		{IdentityWorkload, authorizationv1.ResourceAttributes{Verb: VerbCreate, Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, true, ""},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbGet, Resource: "secrets"}, false, "the server does not serve secrets"},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbGet, Resource: "pods", Subresource: "proxy"}, false, "the server does not serve pods/proxy"},
		{IdentityWorkload, authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbGet, Resource: "pods", Subresource: subLog}, true, ""},
		{IdentityAdmin, authorizationv1.ResourceAttributes{Namespace: "default", Verb: VerbCreate, Resource: "pods", Subresource: subStatus}, false, `pods/status does not serve verb "create"`},
	}
	for _, tt := range tests {
		got := canI(ctx, t, e.client(tt.identity), tt.ra)
		if got.Allowed != tt.allowed || !strings.Contains(got.Reason, tt.reason) {
			t.Errorf("can-i %s %s/%s as %s = %+v; want allowed=%v, reason containing %q", tt.ra.Verb, tt.ra.Resource, tt.ra.Subresource, tt.identity, got, tt.allowed, tt.reason)
		}
	}

	for _, tt := range []struct {
		path, verb string
		allowed    bool
	}{{"/healthz", "get", true}, {"/apis/apps/v1", "get", true}, {"/version", "get", true}, {"/logs", "get", false}, {"/healthz", "post", false}} {
		rev, err := e.client(IdentityWorkload).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: tt.path, Verb: tt.verb}},
		}, metav1.CreateOptions{})
		if err != nil || rev.Status.Allowed != tt.allowed {
			t.Errorf("can-i %s %s: %+v, %v; want allowed=%v", tt.verb, tt.path, rev.Status, err, tt.allowed)
		}
	}

	_, err := e.client(IdentityWorkload).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "exactly one of nonResourceAttributes or resourceAttributes") {
		t.Errorf("an empty access review: %v; want 422", err)
	}
}

// TestRulesReview: kubectl auth can-i --list is admin's everything, else
// the reads and the identity's row of the write table that applies in the
// namespace, marked incomplete for the per-object rules.
func TestRulesReview(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	rules := func(id, ns string) authorizationv1.SubjectRulesReviewStatus {
		rev, err := e.client(id).AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
			&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectRulesReview as %s: %v", id, err)
		}
		return rev.Status
	}
	admin := rules(IdentityAdmin, "default")
	if admin.Incomplete || len(admin.ResourceRules) != 1 || admin.ResourceRules[0].Verbs[0] != "*" {
		t.Errorf("admin's rules: %+v", admin)
	}
	writes := func(st authorizationv1.SubjectRulesReviewStatus) []string {
		var out []string
		for _, r := range st.ResourceRules {
			if r.Verbs[0] == VerbGet && len(r.Verbs) == 3 {
				continue // the reads
			}
			s := strings.Join(r.Resources, ",") + "." + strings.Join(r.APIGroups, ",") + " " + strings.Join(r.Verbs, ",")
			if len(r.ResourceNames) > 0 {
				s += " " + strings.Join(r.ResourceNames, ",")
			}
			out = append(out, s)
		}
		return out
	}
	pet := rules(IdentityPetController, "default")
	want := []string{"events. create,patch", "pods. create,delete", "statefulsets/status.apps update,patch",
		"selfsubjectreviews.authentication.k8s.io create", "selfsubjectaccessreviews.authorization.k8s.io create", "selfsubjectrulesreviews.authorization.k8s.io create"}
	if diff := cmp.Diff(want, writes(pet)); diff != "" {
		t.Errorf("pet-controller's writes (-want +got):\n%s", diff)
	}
	if !pet.Incomplete || !strings.Contains(pet.EvaluationError, "PS-9") {
		t.Errorf("pet-controller's rules are not marked incomplete: %+v", pet)
	}
	reads := 0
	for _, r := range pet.ResourceRules {
		if len(r.Verbs) == 3 && r.Verbs[2] == VerbWatch {
			reads++
		}
	}
	if reads != 7 {
		t.Errorf("pet-controller may read %d groups, want 7 (core and six groups): %+v", reads, pet.ResourceRules)
	}
	kubeletWrites := func(ns string) []string {
		var out []string
		for _, w := range writes(rules(KubeletIdentity("node-1"), ns)) {
			if strings.HasPrefix(w, "leases.") {
				out = append(out, w)
			}
		}
		return out
	}
	if got := kubeletWrites("default"); len(got) != 0 {
		t.Errorf("the kubelet's lease grant shows in namespace default: %v", got)
	}
	if got := kubeletWrites(KubeLeaseNamespace); len(got) != 1 {
		t.Errorf("the kubelet's lease grant in %s: %v", KubeLeaseNamespace, got)
	}
	fence := writes(rules(IdentityFencingController, FenceTokenLeaseNamespace))
	if !strings.Contains(strings.Join(fence, "\n"), "leases.coordination.k8s.io create,update,patch "+FenceTokenLeaseName) {
		t.Errorf("the fence token grant lacks its name: %v", fence)
	}
}

// TestSelfSubjectReview: kubectl auth whoami names every identity and its
// groups; the reviews are in discovery as kube-apiserver lists them, are
// only created, and are not stored.
func TestSelfSubjectReview(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	for _, id := range testIdentities {
		got := whoami(ctx, t, e.client(id))
		want := authenticationv1.UserInfo{Username: id, Groups: IdentityGroups(id)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("whoami as %s (-want +got):\n%s", id, diff)
		}
	}
	if got := IdentityGroups(IdentityAdmin); got[len(got)-1] != GroupAuthenticated || got[0] != GroupMasters {
		t.Errorf("admin's groups: %v", got)
	}

	dc := e.client(IdentityWorkload).Discovery()
	for gv, want := range map[string][]string{
		"authentication.k8s.io/v1": {"selfsubjectreviews SelfSubjectReview"},
		"authorization.k8s.io/v1":  {"selfsubjectaccessreviews SelfSubjectAccessReview", "selfsubjectrulesreviews SelfSubjectRulesReview"},
	} {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery of %s: %v", gv, err)
		}
		var got []string
		for _, r := range list.APIResources {
			if r.Namespaced || !cmp.Equal(r.Verbs, metav1.Verbs{VerbCreate}) || r.SingularName != strings.ToLower(r.Kind) {
				t.Errorf("%s %s: %+v; want cluster-scoped, create only", gv, r.Name, r)
			}
			got = append(got, r.Name+" "+r.Kind)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", gv, diff)
		}
	}

	before := e.storeRevision()
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		resp := e.rawRequest(method, "/apis/authentication.k8s.io/v1/selfsubjectreviews", IdentityWorkload, "", nil)
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("%s selfsubjectreviews: %d, want 405", method, resp.StatusCode)
		}
	}
	resp := e.rawRequest("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", IdentityWorkload, "application/json",
		[]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("POST selfsubjectreviews: %d, want 201", resp.StatusCode)
	}
	if after := e.storeRevision(); after != before {
		t.Errorf("the reviews wrote to the store: revision %d, then %d", before, after)
	}
}
