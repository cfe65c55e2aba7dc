package apiserver

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// syncBuffer is a log sink tests read back.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// impersonating returns a clientset that authenticates as identity and
// impersonates as.
func (e *testEnv) impersonating(identity string, as rest.ImpersonationConfig) kubernetes.Interface {
	e.t.Helper()
	cfg := e.restConfig(identity)
	cfg.Impersonate = as
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatalf("clientset: %v", err)
	}
	return cs
}

// whoami asks the server who cs is.
func whoami(ctx context.Context, t *testing.T, cs kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	rev, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return rev.Status.UserInfo
}

// TestImpersonation: admin acting as another identity (kubectl --as) is
// that identity in everything: the authority rules refuse pet-controller's
// force deletion (PS-9) that admin itself may make and allow its graceful
// deletion, whoami names it, and the request log records it (with admin as
// the impersonator). system:node:NODE is the kubelet of NODE, and the
// group it is in may be asked for.
func TestImpersonation(t *testing.T) {
	logs := &syncBuffer{}
	e := newTestEnv(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := testCtx(t)
	e.seedNode(makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionTrue).obj())
	e.seedPod(makePod("web").node("node-1").phase(corev1.PodRunning).obj())

	pet := e.impersonating(IdentityAdmin, rest.ImpersonationConfig{UserName: IdentityPetController})
	if got := whoami(ctx, t, pet); got.Username != IdentityPetController {
		t.Errorf("whoami --as=%s: %+v", IdentityPetController, got)
	}
	zero := int64(0)
	err := pet.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), RuleForceDelete+": pet-controller may not force delete pod default/web") {
		t.Fatalf("force delete as admin --as=pet-controller: %v; want 403 naming %s and pet-controller", err, RuleForceDelete)
	}
	if err := pet.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("graceful delete as admin --as=pet-controller: %v", err)
	}
	if p := e.storedPod("default", "web"); p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("the graceful delete did not mark the pod terminating: %+v", p)
	}
	log := logs.String()
	for _, want := range []string{
		`msg=refused identity=pet-controller verb=delete resource=pods`,
		`msg=request method=DELETE uri="/api/v1/namespaces/default/pods/web?timeout=30s" identity=pet-controller impersonator=admin code=403`,
		`msg=request method=DELETE uri="/api/v1/namespaces/default/pods/web?timeout=30s" identity=pet-controller impersonator=admin code=200`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}

	for _, as := range []rest.ImpersonationConfig{
		{UserName: "system:node:node-1"},
		{UserName: "system:node:node-1", Groups: []string{GroupNodes}},
		{UserName: KubeletIdentity("node-1"), Groups: []string{GroupNodes, GroupAuthenticated}},
	} {
		got := whoami(ctx, t, e.impersonating(IdentityAdmin, as))
		want := authenticationv1.UserInfo{Username: KubeletIdentity("node-1"), Groups: []string{GroupNodes, GroupAuthenticated}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("whoami as %+v (-want +got):\n%s", as, diff)
		}
	}
	// The kubelet's own pod: its status is the kubelet's to write (LC-2).
	kubelet := e.impersonating(IdentityAdmin, rest.ImpersonationConfig{UserName: "system:node:node-1"})
	pod, err := kubelet.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Message = "reported by the impersonated kubelet"
	if _, err := kubelet.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Errorf("status update as admin --as=system:node:node-1: %v", err)
	}
	// Without impersonation admin is itself.
	if got := whoami(ctx, t, e.client(IdentityAdmin)); got.Username != IdentityAdmin {
		t.Errorf("whoami as admin: %+v", got)
	}
}

// TestImpersonationRefused: only admin impersonates, only identities the
// server can authenticate, only their own groups, and never UIDs or
// extras; each refusal is kube-apiserver's 403 and nothing is written.
// Groups without a user are a 400.
func TestImpersonationRefused(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	tests := []struct {
		name     string
		identity string
		as       rest.ImpersonationConfig
		want     string
	}{
		{"not admin", IdentityScheduler, rest.ImpersonationConfig{UserName: IdentityPetController},
			`users "pet-controller" is forbidden: User "scheduler" cannot impersonate resource "users" in API group "" at the cluster scope: only admin acts as another identity`},
		{"kubelet as admin", KubeletIdentity("node-1"), rest.ImpersonationConfig{UserName: IdentityAdmin},
			`users "admin" is forbidden: User "kubelet:node-1" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{"itself", IdentityWorkload, rest.ImpersonationConfig{UserName: IdentityWorkload},
			`users "workload" is forbidden: User "workload" cannot impersonate resource "users"`},
		{"unknown user", IdentityAdmin, rest.ImpersonationConfig{UserName: "mallory"},
			`users "mallory" is forbidden: User "admin" cannot impersonate resource "users" in API group "" at the cluster scope: podsafe knows no identity "mallory"`},
		{"unknown node", IdentityAdmin, rest.ImpersonationConfig{UserName: "system:node:node-9"},
			`users "system:node:node-9" is forbidden: User "admin" cannot impersonate resource "users" in API group "" at the cluster scope: podsafe knows no identity`},
		{"no such component", IdentityAdmin, rest.ImpersonationConfig{UserName: IdentityDisruptionController},
			`podsafe knows no identity "disruption-controller"`},
		{"another group", IdentityAdmin, rest.ImpersonationConfig{UserName: IdentityPetController, Groups: []string{GroupMasters}},
			`groups "system:masters" is forbidden: User "admin" cannot impersonate resource "groups" in API group "" at the cluster scope: pet-controller is in groups system:authenticated only`},
		{"uid", IdentityAdmin, rest.ImpersonationConfig{UserName: IdentityPetController, UID: "1234"},
			`uids.authentication.k8s.io "1234" is forbidden: User "admin" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope: podsafe's identities have no UID`},
		{"extra", IdentityAdmin, rest.ImpersonationConfig{UserName: IdentityPetController, Extra: map[string][]string{"scopes": {"view"}}},
			`userextras.authentication.k8s.io "view" is forbidden: User "admin" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := e.impersonating(tt.identity, tt.as)
			_, err := cs.CoreV1().Pods("default").Create(ctx, makePod("p").obj(), metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("create as %s impersonating %+v: %v; want 403 %q", tt.identity, tt.as, err, tt.want)
			}
			if _, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("a read is refused too: %v", err)
			}
			if p := e.storedPod("default", "p"); p != nil {
				t.Fatalf("a refused impersonation created pod %s", p.Name)
			}
		})
	}

	req, err := http.NewRequest(http.MethodGet, e.http.URL+"/api/v1/pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenOf(IdentityAdmin))
	req.Header.Add(authenticationv1.ImpersonateGroupHeader, GroupNodes)
	st, _ := readStatus(t, mustDo(t, e, req))
	if st.Code != http.StatusBadRequest || !strings.Contains(st.Message, `requested groups "system:nodes" without impersonating a user`) {
		t.Errorf("a group without a user: %d %q; want 400", st.Code, st.Message)
	}
}

// mustDo sends req to e's server.
func mustDo(t *testing.T, e *testEnv, req *http.Request) *http.Response {
	t.Helper()
	resp, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
