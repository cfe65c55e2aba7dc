package apiserver

import (
	"fmt"
	"net/http/httptest"
	"testing"
)

// BenchmarkAuthenticate measures one request's authentication against the
// tokens of a 5,000-node cluster (one per kubelet plus the components).
func BenchmarkAuthenticate(b *testing.B) {
	tokens := map[string]string{}
	for i := range 5000 {
		tokens[fmt.Sprintf("token-%064d", i)] = KubeletIdentity(fmt.Sprintf("node-%d", i))
	}
	s := &Server{tokens: tokenTable(tokens)}
	r := httptest.NewRequest("GET", "/api/v1/pods", nil)
	r.Header.Set("Authorization", "Bearer "+fmt.Sprintf("token-%064d", 4321))
	b.ReportAllocs()
	for b.Loop() {
		id, err := s.authenticate(r)
		if err != nil || id != KubeletIdentity("node-4321") {
			b.Fatalf("authenticate = %q, %v", id, err)
		}
	}
}

func TestAuthenticateByDigest(t *testing.T) {
	s := &Server{tokens: tokenTable(map[string]string{"secret-a": IdentityAdmin, "secret-b": KubeletIdentity("n1")})}
	for _, c := range []struct{ header, want string }{
		{"Bearer secret-a", IdentityAdmin},
		{"bearer  secret-b ", KubeletIdentity("n1")},
		{"Bearer secret-", ""},
		{"Bearer secret-ab", ""},
		{"Basic secret-a", ""},
		{"", ""},
	} {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		id, err := s.authenticate(r)
		if id != c.want || (err == nil) != (c.want != "") {
			t.Errorf("Authorization %q: got %q, %v; want %q", c.header, id, err, c.want)
		}
	}
}
