package kubelet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func TestPodListModeFor(t *testing.T) {
	for v, want := range map[string]string{
		"v1.33.6": PodListRV0, "v1.34.4": PodListRV0, "v1.35.4": PodListWatchList, "v1.36.1": PodListWatchList,
		"v1.37.2": PodListWatchList, "nonsense": PodListModeFor(DefaultVersion),
	} {
		if got := PodListModeFor(v); got != want {
			t.Errorf("PodListModeFor(%q) = %q, want %q", v, got, want)
		}
	}
	if err := (&Config{Client: kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://x"}), NodeName: "n", Runtime: NewSimRuntime("n", nil, nil), PodList: "stream"}).Validate(); err == nil || !strings.Contains(err.Error(), "PodList") {
		t.Errorf("PodList stream: %v, want an error naming PodList", err)
	}
}

// podServer answers a node's pod LIST with an empty list at
// resourceVersion 5, holds WATCHes open, and refuses watch-list requests
// when refuseWatchList; it records each request's query.
type podServer struct {
	refuseWatchList bool
	mu              sync.Mutex
	queries         []string
}

func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	s.queries = append(s.queries, r.URL.RawQuery)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true" && s.refuseWatchList:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd unreachable","reason":"ServiceUnavailable","code":503}`))
	case q.Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		if q.Get("sendInitialEvents") == "true" {
			// No pods, then the bookmark that ends the initial events.
			_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`))
	}
}

// first returns the first query that f accepts.
func (s *podServer) first(f func(string) bool) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.queries, f)
	if i < 0 {
		return "", false
	}
	return s.queries[i], true
}

// TestPodListRequests: the modes send what the real kubelet's reflector
// sends. PodListRV0 lists at resourceVersion=0 (any API server's cache,
// however stale, answers it); PodListWatchList opens one watch-list and,
// when it fails, falls back to that same LIST at resourceVersion=0.
func TestPodListRequests(t *testing.T) {
	for _, tc := range []struct {
		mode            string
		refuseWatchList bool
		wantFirst       []string
		wantList        bool
	}{
		{PodListRV0, false, []string{"resourceVersion=0", "fieldSelector=spec.nodeName%3Dnode-1"}, true},
		{PodListWatchList, false, []string{"watch=true", "sendInitialEvents=true", "resourceVersionMatch=NotOlderThan"}, false},
		{PodListWatchList, true, []string{"sendInitialEvents=true"}, true},
	} {
		srv := &podServer{refuseWatchList: tc.refuseWatchList}
		hs := httptest.NewServer(srv)
		cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
		inf := cache.NewSharedIndexInformer(newPodListWatch(cs, "node-1", tc.mode), &corev1.Pod{}, 0, cache.Indexers{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		go inf.RunWithContext(ctx)
		synced := cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
		if !synced {
			t.Errorf("%s: never synced", tc.mode)
		}
		first, _ := srv.first(func(string) bool { return true })
		for _, want := range tc.wantFirst {
			if !strings.Contains(first, want) {
				t.Errorf("%s (watch-list refused %v): first request %q, want %s", tc.mode, tc.refuseWatchList, first, want)
			}
		}
		list, listed := srv.first(func(q string) bool { return !strings.Contains(q, "watch=true") })
		if listed != tc.wantList || (listed && !strings.Contains(list, "resourceVersion=0")) {
			t.Errorf("%s (watch-list refused %v): LIST %q (sent %v), want sent %v with resourceVersion=0", tc.mode, tc.refuseWatchList, list, listed, tc.wantList)
		}
		cancel()
		time.Sleep(10 * time.Millisecond)
		hs.CloseClientConnections()
		hs.Close()
	}
}

// TestStripManagedFields: the pod cache's transform drops a pod's field sets
// and nothing else, and passes other objects (a tombstone) through.
func TestStripManagedFields(t *testing.T) {
	p := &corev1.Pod{}
	p.Name, p.Spec.NodeName = "p", "n"
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	got, err := stripManagedFields(p)
	if err != nil {
		t.Fatal(err)
	}
	if q := got.(*corev1.Pod); q.ManagedFields != nil || q.Name != "p" || q.Spec.NodeName != "n" {
		t.Errorf("transformed pod %+v, want its name and node and no managedFields", q.ObjectMeta)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p}
	if got, err := stripManagedFields(tomb); err != nil || got != any(tomb) {
		t.Errorf("tombstone transformed to %v, %v; want it unchanged", got, err)
	}
}
