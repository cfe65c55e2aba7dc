package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// The self reviews are how kubectl auth whoami and kubectl auth can-i ask
// the server who they are and what they may do. They are create-only and
// never stored: the answer comes back in the created object's status, for
// the identity the request runs as (after impersonation, so kubectl auth
// can-i --as=pet-controller asks about pet-controller).
//
// The answers are not a second copy of the authority rules: an access
// review builds the Request the handler would build and asks Authorize (or,
// for verb impersonate, mayImpersonate) for the decision the request would
// get; a rules review lists the identity's row of the write table
// (GrantsOf), which Authorize consults first.

// reviewSpec is one row of the review table.
type reviewSpec struct {
	group, version, resource, kind string
	// answer fills in the status of obj, a decoded review of kind, for
	// identity.
	answer func(s *Server, ctx context.Context, identity string, obj runtime.Object) error
}

// reviewTable is every review the server answers.
var reviewTable = []reviewSpec{
	{group: authenticationv1.GroupName, version: "v1", resource: "selfsubjectreviews", kind: "SelfSubjectReview",
		answer: (*Server).answerSelfSubjectReview},
	{group: authorizationv1.GroupName, version: "v1", resource: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview",
		answer: (*Server).answerAccessReview},
	{group: authorizationv1.GroupName, version: "v1", resource: "selfsubjectrulesreviews", kind: "SelfSubjectRulesReview",
		answer: (*Server).answerRulesReview},
}

// serveReview answers POST of a review with 201 and the review, its status
// filled in.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, rev *reviewSpec) {
	if r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(fmt.Sprintf("%s is not supported on %s: a review is only created", r.Method, rev.resource)))
		return
	}
	release, ok := s.limits.admit(w, IdentityFrom(r.Context()), true)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.requestContext(r)
	defer cancel()
	validation, err := fieldValidation(r)
	if err != nil {
		writeError(w, err)
		return
	}
	gvk := schema.GroupVersionKind{Group: rev.group, Version: rev.version, Kind: rev.kind}
	obj, warnings, err := decodeBody(r, gvk, validation)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := rev.answer(s, ctx, IdentityFrom(ctx), obj); err != nil {
		writeError(w, err)
		return
	}
	writeWarnings(w, warnings)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	writeJSON(w, http.StatusCreated, obj)
}

// answerSelfSubjectReview reports the identity and its groups (kubectl auth
// whoami).
func (s *Server) answerSelfSubjectReview(_ context.Context, identity string, obj runtime.Object) error {
	rev := obj.(*authenticationv1.SelfSubjectReview)
	rev.Status = authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
		Username: identity, Groups: IdentityGroups(identity),
	}}
	return nil
}

// answerAccessReview decides a SelfSubjectAccessReview (kubectl auth
// can-i). A refusal by a rule is Denied with the rule's reason; a question
// about something the server does not serve is neither allowed nor denied.
func (s *Server) answerAccessReview(ctx context.Context, identity string, obj runtime.Object) error {
	rev := obj.(*authorizationv1.SelfSubjectAccessReview)
	ra, nra := rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes
	if (ra == nil) == (nra == nil) {
		return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: "SelfSubjectAccessReview"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec"), "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")})
	}
	var a accessAnswer
	var err error
	if ra != nil {
		a, err = s.decideAccess(ctx, identity, *ra)
	} else {
		a = decideNonResource(*nra)
	}
	if err != nil {
		return err
	}
	rev.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: a.allowed, Denied: a.denied, Reason: a.reason}
	return nil
}

// accessAnswer is an access review's decision.
type accessAnswer struct {
	allowed, denied bool
	reason          string
}

// allVerbs are the verbs a "*" verb stands for.
var allVerbs = []string{VerbGet, VerbList, VerbWatch, VerbCreate, VerbUpdate, VerbPatch, VerbDelete, VerbDeleteCollection}

// decideAccess decides resource attributes for identity: impersonation by
// mayImpersonate, everything else by Authorize on the Request the handler
// would build (see accessRequest). A "*" verb, group or resource is
// allowed when every verb and served resource it stands for is.
func (s *Server) decideAccess(ctx context.Context, identity string, ra authorizationv1.ResourceAttributes) (accessAnswer, error) {
	if ra.Verb == VerbImpersonate {
		t := impersonationTarget{Resource: schema.GroupResource{Group: ra.Group, Resource: ra.Resource}, Subresource: ra.Subresource, Name: ra.Name}
		if reason := mayImpersonate(identity, t, "", s.canAuthenticate); reason != "" {
			return accessAnswer{denied: true, reason: reason}, nil
		}
		return accessAnswer{allowed: true}, nil
	}
	if ra.Verb == "*" || ra.Resource == "*" || ra.Group == "*" {
		return s.decideWildcard(ctx, identity, ra)
	}
	gr := schema.GroupResource{Group: ra.Group, Resource: ra.Resource}
	if rev := s.reg.reviewGR(gr); rev != nil {
		// Every identity may ask who it is and what it may do.
		if ra.Verb == VerbCreate && ra.Subresource == "" {
			return accessAnswer{allowed: true}, nil
		}
		return accessAnswer{reason: fmt.Sprintf("%s is only created", gr)}, nil
	}
	var info *resourceInfo
	if ra.Version != "" {
		info, _ = s.reg.lookup(ra.Group, ra.Version, ra.Resource)
	} else {
		info, _ = s.reg.lookupGR(gr)
	}
	what := gr.String()
	if ra.Subresource != "" {
		what += "/" + ra.Subresource
	}
	switch {
	case info == nil:
		return accessAnswer{reason: fmt.Sprintf("the server does not serve %s", what)}, nil
	case ra.Subresource != "" && !info.hasSubresource(ra.Subresource):
		return accessAnswer{reason: fmt.Sprintf("the server does not serve %s", what)}, nil
	}
	verbs := info.verbs
	if ra.Subresource != "" {
		verbs = subresourceVerbs(ra.Subresource)
	}
	if !slices.Contains(verbs, ra.Verb) {
		return accessAnswer{reason: fmt.Sprintf("%s does not serve verb %q", what, ra.Verb)}, nil
	}
	req, err := s.accessRequest(ctx, identity, info, ra)
	if err != nil {
		return accessAnswer{}, err
	}
	var d Decision
	if req.Name == "" && !readVerb(req.Verb) {
		d = decideUnnamedWrite(req)
	} else {
		d = Authorize(req)
	}
	switch {
	case d.Allowed:
		return accessAnswer{allowed: true}, nil
	case s.cfg.BypassAuthority:
		// The planted bug lets refused requests through (authorize), and
		// the review says what a request would meet.
		return accessAnswer{allowed: true, reason: "authority bypassed: " + d.Reason}, nil
	}
	return accessAnswer{denied: true, reason: d.Reason}, nil
}

// decideUnnamedWrite decides a write that names no object: it is allowed
// when the write table grants it, which is what Authorize asks first;
// whether a request is then allowed depends on the object it writes (a pod
// bound to the kubelet's node, a graceful rather than a force deletion),
// which a review that names the object answers. Refusals are Authorize's.
func decideUnnamedWrite(req Request) Decision {
	if granted(req) {
		return allow
	}
	return Authorize(req)
}

// accessRequest builds the Request a request with attributes ra would be
// judged by: for a named object that exists, with the stored object as
// Old, its Node where the handler looks it up, and for a pod deletion the
// grace a default DELETE would leave (GracefulDelete). What a write would
// write is not known: a create is judged without its object, an update as
// one that writes the stored object back unchanged, so the review answers
// for a write that changes only what the identity may change.
func (s *Server) accessRequest(ctx context.Context, identity string, info *resourceInfo, ra authorizationv1.ResourceAttributes) (Request, error) {
	req := Request{Identity: identity, Verb: ra.Verb, Resource: info.gr, Subresource: ra.Subresource, Name: ra.Name}
	if info.namespaced {
		req.Namespace = ra.Namespace
	}
	if ra.Name == "" || readVerb(ra.Verb) || (ra.Verb == VerbCreate && ra.Subresource == "") {
		return req, nil
	}
	if info.namespaced && req.Namespace == "" {
		return req, nil
	}
	stored, err := s.store.Get(ctx, raftstore.Key{Resource: info.storeKey, Namespace: req.Namespace, Name: req.Name})
	if errors.Is(err, raftstore.ErrNotFound) {
		return req, nil
	}
	if err != nil {
		return req, storeError(err, info.gr, req.Name)
	}
	cur, err := info.decodeStored(stored.Data)
	if err != nil {
		return req, err
	}
	req.Old = cur
	if req.Verb == VerbUpdate || req.Verb == VerbPatch {
		req.Object = cur.DeepCopyObject()
	}
	switch o := cur.(type) {
	case *corev1.Pod:
		deletes := req.Verb == VerbDelete || (req.Verb == VerbCreate && req.Subresource == subEviction)
		if deletes {
			grace := leftGrace(GracefulDelete(o, nil, s.clock.Now()))
			req.GracePeriodSeconds = &grace
		}
		if (deletes && *req.GracePeriodSeconds == 0 && o.Spec.NodeName != "" && !podTerminal(o)) ||
			(req.Subresource == subStatus && identity == IdentityNodeController) {
			if req.Node, err = s.podNode(ctx, o); err != nil {
				return req, err
			}
		}
	case *storagev1.VolumeAttachment:
		if req.Verb == VerbDelete {
			if req.Node, err = s.nodeNamed(ctx, o.Spec.NodeName); err != nil {
				return req, err
			}
		}
	}
	return req, nil
}

// decideWildcard decides a "*" verb, group or resource: allowed when every
// verb and served resource it stands for is, else the first refusal.
func (s *Server) decideWildcard(ctx context.Context, identity string, ra authorizationv1.ResourceAttributes) (accessAnswer, error) {
	verbs := []string{ra.Verb}
	if ra.Verb == "*" {
		verbs = allVerbs
	}
	var infos []*resourceInfo
	for _, info := range s.reg.resources() {
		if (ra.Group == "*" || ra.Group == info.gr.Group) && (ra.Resource == "*" || ra.Resource == info.gr.Resource) {
			infos = append(infos, info)
		}
	}
	if len(infos) == 0 {
		return accessAnswer{reason: fmt.Sprintf("the server serves no resource matching %s", schema.GroupResource{Group: ra.Group, Resource: ra.Resource})}, nil
	}
	for _, info := range infos {
		for _, v := range verbs {
			one := ra
			one.Verb, one.Group, one.Version, one.Resource, one.Subresource = v, info.gr.Group, info.gvk.Version, info.gr.Resource, ""
			a, err := s.decideAccess(ctx, identity, one)
			if err != nil || !a.allowed {
				return a, err
			}
		}
	}
	return accessAnswer{allowed: true}, nil
}

// readVerb reports whether verb only reads.
func readVerb(verb string) bool {
	return verb == VerbGet || verb == VerbList || verb == VerbWatch
}
