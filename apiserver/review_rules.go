package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// nonResourceURLs are the paths every identity may get outside the
// resources (route serves them): discovery, OpenAPI, health and version.
var nonResourceURLs = []string{
	"/", "/api", "/api/*", "/apis", "/apis/*", openAPIPrefix, openAPIPrefix + "/*",
	"/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*", "/version",
}

// decideNonResource decides non-resource attributes: a get of a path route
// serves outside the resources is allowed to every identity; nothing else
// is served.
func decideNonResource(nra authorizationv1.NonResourceAttributes) accessAnswer {
	if nra.Verb != VerbGet {
		return accessAnswer{reason: fmt.Sprintf("the server serves only get on non-resource paths, not %q", nra.Verb)}
	}
	for _, u := range nonResourceURLs {
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(nra.Path, prefix) || nra.Path == u {
			return accessAnswer{allowed: true}
		}
	}
	return accessAnswer{reason: fmt.Sprintf("the server serves no non-resource path %s", nra.Path)}
}

// rulesIncomplete is the evaluation error of a rules review whose grants
// the per-object rules narrow further.
const rulesIncomplete = "podsafe's authority rules also judge each write against the object it writes " +
	"(force deletion PS-9/PS-10/PS-14, pod status LC-2, binding LC-3, a kubelet's own node and pods PS-1, " +
	"heart-beat leases PS-13, the fence record PS-14, attachments PS-15); " +
	"kubectl auth can-i VERB RESOURCE/NAME answers for one object"

// answerRulesReview lists what identity may do in the review's namespace
// (kubectl auth can-i --list): everything for admin; else reads of every
// served resource, and the identity's row of the write table (GrantsOf)
// that applies in the namespace, marked incomplete because the
// per-object rules narrow it.
func (s *Server) answerRulesReview(_ context.Context, identity string, obj runtime.Object) error {
	rev := obj.(*authorizationv1.SelfSubjectRulesReview)
	ns := rev.Spec.Namespace
	grants, all := GrantsOf(identity)
	if all {
		rev.Status = authorizationv1.SubjectRulesReviewStatus{
			ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
		}
		return nil
	}
	var rules []authorizationv1.ResourceRule
	for _, g := range append([]string{""}, s.reg.groups...) {
		if !s.servesResources(g) {
			continue
		}
		rules = append(rules, authorizationv1.ResourceRule{
			Verbs: []string{VerbGet, VerbList, VerbWatch}, APIGroups: []string{g}, Resources: []string{"*"},
		})
	}
	for _, g := range grants {
		if g.Namespace != "" && ns != "" && g.Namespace != ns {
			continue
		}
		res := g.Resource.Resource
		if g.Subresource != "" {
			res += "/" + g.Subresource
		}
		rule := authorizationv1.ResourceRule{Verbs: slices.Clone(g.Verbs), APIGroups: []string{g.Resource.Group}, Resources: []string{res}}
		if g.Name != "" {
			rule.ResourceNames = []string{g.Name}
		}
		rules = append(rules, rule)
	}
	for _, g := range s.reg.groups {
		for _, v := range s.reg.versions[g] {
			for _, rev := range s.reg.reviews[schema.GroupVersion{Group: g, Version: v}] {
				rules = append(rules, authorizationv1.ResourceRule{Verbs: []string{VerbCreate}, APIGroups: []string{g}, Resources: []string{rev.resource}})
			}
		}
	}
	rev.Status = authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    rules,
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{VerbGet}, NonResourceURLs: slices.Clone(nonResourceURLs)}},
		Incomplete:       len(grants) > 0,
	}
	if rev.Status.Incomplete {
		rev.Status.EvaluationError = rulesIncomplete
	}
	return nil
}

// servesResources reports whether group holds served resources (not only
// reviews).
func (s *Server) servesResources(group string) bool {
	for _, v := range s.reg.versions[group] {
		if len(s.reg.byGV[schema.GroupVersion{Group: group, Version: v}]) > 0 {
			return true
		}
	}
	return false
}
