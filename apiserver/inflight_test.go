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
// have separate bounds; the admin identity is not counted; a released slot
// admits the next request. (Watches never reach admit: serveResource sends
// them on before it.)
func TestInflightBounds(t *testing.T) {
	in := newInflight(1, 1)
	admit := func(mutating bool, identity string) (func(), *httptest.ResponseRecorder) {
		t.Helper()
		w := httptest.NewRecorder()
		release, ok := in.admit(w, identity, mutating)
		if ok != (release != nil) {
			t.Fatalf("admit: ok %v with release %v", ok, release != nil)
		}
		return release, w
	}
	mustAdmit := func(mutating bool, identity string) func() {
		t.Helper()
		release, w := admit(mutating, identity)
		if release == nil {
			t.Fatalf("mutating=%v as %s refused with %d, want admitted", mutating, identity, w.Code)
		}
		return release
	}
	mustRefuse := func(mutating bool, identity string) {
		t.Helper()
		release, w := admit(mutating, identity)
		if release != nil {
			t.Fatalf("mutating=%v as %s admitted past its bound", mutating, identity)
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

	releaseGet := mustAdmit(false, IdentityWorkload)
	mustRefuse(false, KubeletIdentityPrefix+"n1")
	releasePost := mustAdmit(true, IdentityWorkload) // its own bound
	mustRefuse(true, IdentityScheduler)
	mustAdmit(false, IdentityAdmin)() // exempt
	mustAdmit(true, IdentityAdmin)()
	releaseGet()
	mustAdmit(false, IdentityWorkload)()
	releasePost()
	mustAdmit(true, IdentityWorkload)()

	unbounded := newInflight(-1, -1)
	for range 3 {
		if _, ok := unbounded.admit(httptest.NewRecorder(), IdentityWorkload, false); !ok {
			t.Fatal("a negative bound refused a request")
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		if mutatingMethod(m) {
			t.Errorf("%s counted as mutating", m)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if !mutatingMethod(m) {
			t.Errorf("%s counted as read-only", m)
		}
	}
}
