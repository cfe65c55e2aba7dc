package apiserver

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// TestAddReviewsRefusesDuplicates: a review that names a served resource,
// or one listed twice, is refused when the server is built, not served
// ambiguously.
func TestAddReviewsRefusesDuplicates(t *testing.T) {
	access := reviewSpec{group: authorizationv1.GroupName, version: "v1", resource: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview"}
	for _, c := range []struct {
		name  string
		table []reviewSpec
		want  string
	}{
		{"the served reviews", reviewTable, ""},
		{"a review of a served resource", []reviewSpec{{group: "", version: "v1", resource: "pods", kind: "Pod"}}, "/v1, Resource=pods listed twice"},
		{"one review twice", []reviewSpec{access, access}, "selfsubjectaccessreviews listed twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg, err := newRegistry(resourceTable)
			if err != nil {
				t.Fatal(err)
			}
			err = reg.addReviews(c.table)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("addReviews = %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("addReviews = %v, want an error saying %q", err, c.want)
			}
		})
	}
}
