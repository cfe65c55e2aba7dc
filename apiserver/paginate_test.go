package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/podsafe/podsafe/raftstore"
)

// podNames lists the names of pods.
func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// TestPageListAtFirstRevision: pages of at most limit items, a continue
// token and remainingItemCount while items remain, and every page of the
// list as of the first page's revision, whatever was written between.
func TestPageListAtFirstRevision(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5"} {
		e.seedPod(makePod(n).obj())
	}

	first, err := pods.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Writes between the pages: a pod that sorts first, one of the next
	// page's deleted, a later one changed.
	e.seedPod(makePod("p0").obj())
	if err := pods.Delete(ctx, "p3", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	p5, _ := pods.Get(ctx, "p5", metav1.GetOptions{})
	p5.Labels = map[string]string{"changed": "yes"}
	if _, err := pods.Update(ctx, p5, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	second, err := pods.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if err != nil {
		t.Fatal(err)
	}
	third, err := pods.List(ctx, metav1.ListOptions{Limit: 2, Continue: second.Continue})
	if err != nil {
		t.Fatal(err)
	}
	type page struct {
		Names     []string
		Remaining *int64
		More      bool
		RV        string
	}
	got := []page{}
	for _, l := range []*corev1.PodList{first, second, third} {
		got = append(got, page{podNames(l.Items), l.RemainingItemCount, l.Continue != "", l.ResourceVersion})
	}
	rv := first.ResourceVersion
	want := []page{
		{[]string{"p1", "p2"}, new(int64(3)), true, rv},
		{[]string{"p3", "p4"}, new(int64(1)), true, rv},
		{[]string{"p5"}, nil, false, rv},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if third.Items[0].Labels["changed"] != "" {
		t.Errorf("the last page has p5 as changed after the first page: %v", third.Items[0].Labels)
	}
}

// TestPagePager: client-go's pager reads a list in pages of its size.
func TestPagePager(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("p%d", i)
		e.seedPod(makePod(name).obj())
		want = append(want, name)
	}
	pods := e.client(IdentityAdmin).CoreV1().Pods("")
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return pods.List(ctx, opts)
	})
	p.PageSize = 3
	var got []string
	before := len(e.requestLog())
	if err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		got = append(got, obj.(*corev1.Pod).Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	var pages int
	for _, r := range e.requestLog()[before:] {
		if strings.Contains(r, "limit=3") {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("the pager made %d requests with limit=3, want 3 pages", pages)
	}
}

// TestPageSelectorsAndTables: a filtered list pages through the matching
// items without remainingItemCount, and a Table page carries the list's
// continue token and count.
func TestPageSelectorsAndTables(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	for i := range 6 {
		e.seedPod(makePod(fmt.Sprintf("p%d", i)).label("even", fmt.Sprint(i%2 == 0)).obj())
	}
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	var got []string
	opts := metav1.ListOptions{LabelSelector: "even=true", Limit: 2}
	for {
		l, err := pods.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if l.RemainingItemCount != nil {
			t.Errorf("a filtered page has remainingItemCount %d; kube-apiserver sends none", *l.RemainingItemCount)
		}
		got = append(got, podNames(l.Items)...)
		if opts.Continue = l.Continue; l.Continue == "" {
			break
		}
	}
	if diff := cmp.Diff([]string{"p0", "p2", "p4"}, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}

	tab := e.getTable("/api/v1/namespaces/default/pods?limit=4")
	if len(tab.Rows) != 4 || tab.Continue == "" || tab.RemainingItemCount == nil || *tab.RemainingItemCount != 2 {
		t.Fatalf("Table page: %d rows, continue %q, remaining %v; want 4 rows, a token and 2", len(tab.Rows), tab.Continue, tab.RemainingItemCount)
	}
	rest := e.getTable("/api/v1/namespaces/default/pods?limit=4&continue=" + tab.Continue)
	if len(rest.Rows) != 2 || rest.Continue != "" || rest.ResourceVersion != tab.ResourceVersion || len(rest.ColumnDefinitions) == 0 {
		t.Errorf("Table second page: %d rows, continue %q, rv %s (first %s); want the last 2 at the first's revision", len(rest.Rows), rest.Continue, rest.ResourceVersion, tab.ResourceVersion)
	}
}

// statusOfResponse reads a Status answer.
func statusOfResponse(t *testing.T, resp *http.Response) metav1.Status {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return st
}

func TestPageBadRequests(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("p").obj())
	token := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		query, message string
	}{
		{"limit=ten", `invalid limit "ten"`},
		{"limit=1&continue=!!!", "invalid continue token: continue key is not valid: illegal base64 data"},
		{"limit=1&continue=" + token(`{"v":"meta.k8s.io/v2","rv":5,"start":"p\u0000"}`), "server does not recognize this encoded version"},
		{"limit=1&continue=" + token(`{"v":"meta.k8s.io/v1","rv":0,"start":"p\u0000"}`), "incorrect encoded start resourceVersion"},
		{"limit=1&continue=" + token(`{"v":"meta.k8s.io/v1","rv":5,"start":""}`), "encoded start key empty"},
		{"limit=1&continue=" + token(`{"v":"meta.k8s.io/v1","rv":5,"start":"../secrets/x"}`), "continue key is not valid"},
		{"limit=1&resourceVersion=7&continue=" + token(`{"v":"meta.k8s.io/v1","rv":5,"start":"p\u0000"}`), "specifying resource version is not allowed when using continue"},
	} {
		st := statusOfResponse(t, e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/pods?"+tt.query, IdentityAdmin, "", nil))
		if st.Code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, tt.message) {
			t.Errorf("%s: %d %s %q, want 400 BadRequest with %q", tt.query, st.Code, st.Reason, st.Message, tt.message)
		}
	}
}

// TestPageLimitIgnored: a negative limit is no limit, and a list at
// resourceVersion 0 ignores limit, as kube-apiserver's watch cache does.
func TestPageLimitIgnored(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("p1").obj())
	e.seedPod(makePod("p2").obj())
	for _, query := range []string{"limit=-1", "limit=1&resourceVersion=0"} {
		resp := e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/pods?"+query, IdentityAdmin, "", nil)
		var l corev1.PodList
		_ = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(l.Items) != 2 || l.Continue != "" {
			t.Errorf("%s: %d with %d items, continue %q; want the whole list", query, resp.StatusCode, len(l.Items), l.Continue)
		}
	}
}

// TestPageExpiredToken: a token whose snapshot is gone (past its time, or
// from another server) is 410 Expired with kube-apiserver's message and a
// token that continues, inconsistently, at the current revision.
func TestPageExpiredToken(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		e.seedPod(makePod(n).obj())
	}
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	first, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}

	// Another server on the same store never made the snapshot.
	other := newTestEnvOn(t, e.store)
	_, err = other.client(IdentityAdmin).CoreV1().Pods("default").List(ctx, metav1.ListOptions{Limit: 1, Continue: first.Continue})
	st, ok := err.(apierrors.APIStatus)
	if !ok || !apierrors.IsResourceExpired(err) || st.Status().Code != http.StatusGone || st.Status().Message != inconsistentContinueMessage {
		t.Fatalf("a token on another server: %v, want 410 Expired with kube-apiserver's message", err)
	}
	// The inconsistent token continues after p1 at the current revision.
	e.seedPod(makePod("p4").obj())
	rest, err := pods.List(ctx, metav1.ListOptions{Continue: st.Status().ListMeta.Continue})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"p2", "p3", "p4"}, podNames(rest.Items)); diff != "" {
		t.Errorf("inconsistent continuation (-want +got):\n%s", diff)
	}

	// Past its lifetime the snapshot is gone.
	now := time.Now()
	pageSnapshots.mu.Lock()
	saved := pageSnapshots.now
	pageSnapshots.now = func() time.Time { return now.Add(pageSnapshotTTL + time.Second) }
	pageSnapshots.mu.Unlock()
	t.Cleanup(func() {
		pageSnapshots.mu.Lock()
		pageSnapshots.now = saved
		pageSnapshots.mu.Unlock()
	})
	_, err = pods.List(ctx, metav1.ListOptions{Limit: 1, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("an expired token: %v, want 410 Expired", err)
	}
}

// TestPageCacheBounds: the snapshot cache evicts the oldest snapshot past
// its entry or byte bound and does not keep one larger than the bound.
func TestPageCacheBounds(t *testing.T) {
	now := testStart
	c := newPageCache(func() time.Time { return now }, time.Minute, 100, 2)
	s := &Server{}
	key := func(rev uint64) snapshotKey { return snapshotKey{server: weak.Make(s), resource: "pods", rev: rev} }
	objs := func(size int) []raftstore.Object {
		return []raftstore.Object{{Key: raftstore.Key{Resource: "pods"}, Data: make([]byte, size)}}
	}
	kept := func() []uint64 {
		var out []uint64
		for _, rev := range []uint64{1, 2, 3, 4, 5} {
			if _, ok := c.get(key(rev)); ok {
				out = append(out, rev)
			}
		}
		return out
	}
	for rev := uint64(1); rev <= 3; rev++ {
		now = now.Add(time.Second)
		c.put(key(rev), objs(10))
	}
	if diff := cmp.Diff([]uint64{2, 3}, kept()); diff != "" {
		t.Errorf("past 2 entries (-want +got):\n%s", diff)
	}
	now = now.Add(time.Second)
	c.put(key(4), objs(95))
	if diff := cmp.Diff([]uint64{4}, kept()); diff != "" {
		t.Errorf("past 100 bytes (-want +got):\n%s", diff)
	}
	if c.put(key(5), objs(101)) {
		t.Error("a snapshot larger than the bound was kept")
	}
	now = now.Add(time.Minute)
	if got := kept(); len(got) != 0 {
		t.Errorf("after the lifetime: %v kept, want none", got)
	}
}
