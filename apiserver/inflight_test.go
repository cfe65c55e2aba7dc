package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInflightBounds: past its bound a request is refused at once with 429,
// Retry-After and a TooManyRequests Status; read-only and mutating requests
// have separate bounds; watches and the admin identity are not counted; a
// released slot admits the next request.
func TestInflightBounds(t *testing.T) {
	in := newInflight(1, 1)
	get := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
	post := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/a/pods", nil)
	watch := httptest.NewRequest(http.MethodGet, "/api/v1/pods?watch=true", nil)
	oldWatch := httptest.NewRequest(http.MethodGet, "/api/v1/watch/pods", nil)

	admit := func(r *http.Request, identity string) (func(), *httptest.ResponseRecorder) {
		t.Helper()
		w := httptest.NewRecorder()
		release, ok := in.admit(w, r, identity)
		if ok != (release != nil) {
			t.Fatalf("admit: ok %v with release %v", ok, release != nil)
		}
		return release, w
	}
	mustAdmit := func(r *http.Request, identity string) func() {
		t.Helper()
		release, w := admit(r, identity)
		if release == nil {
			t.Fatalf("%s %s as %s refused with %d, want admitted", r.Method, r.URL, identity, w.Code)
		}
		return release
	}
	mustRefuse := func(r *http.Request, identity string) {
		t.Helper()
		release, w := admit(r, identity)
		if release != nil {
			t.Fatalf("%s %s as %s admitted past its bound", r.Method, r.URL, identity)
		}
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("refusal: code %d, Retry-After %q; want 429 and 1", w.Code, w.Header().Get("Retry-After"))
		}
		var st metav1.Status
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		if st.Reason != metav1.StatusReasonTooManyRequests || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Fatalf("refusal Status: %+v", st)
		}
	}

	releaseGet := mustAdmit(get, IdentityWorkload)
	mustRefuse(get, KubeletIdentityPrefix+"n1")
	releasePost := mustAdmit(post, IdentityWorkload) // its own bound
	mustRefuse(post, IdentityScheduler)
	for _, r := range []*http.Request{watch, oldWatch} {
		mustAdmit(r, IdentityWorkload)() // long-running: never counted
	}
	mustAdmit(get, IdentityAdmin)() // exempt
	mustAdmit(post, IdentityAdmin)()
	releaseGet()
	mustAdmit(get, IdentityWorkload)()
	releasePost()
	mustAdmit(post, IdentityWorkload)()

	unbounded := newInflight(-1, -1)
	for range 3 {
		w := httptest.NewRecorder()
		if _, ok := unbounded.admit(w, get, IdentityWorkload); !ok {
			t.Fatal("a negative bound refused a request")
		}
	}
}
