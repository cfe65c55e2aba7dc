package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Impersonation is kube-apiserver's: a request that carries Impersonate-User
// (kubectl --as) runs as the named identity once its sender is found allowed
// to impersonate it, and from then on everything (the authority rules, the
// in-flight bound, the request log, IdentityFrom) sees only the impersonated
// identity; the sender is kept for the request log as its impersonator.
//
// Each thing asked for is authorized on its own, in kube-apiserver's order
// (the user, each group, each extra, the UID), as verb "impersonate" on
// users, groups, userextras/KEY or uids, and the first refusal is a 403 in
// kube-apiserver's words: users "X" is forbidden: User "Y" cannot
// impersonate resource "users" in API group "" at the cluster scope.
//
// podsafe's differences follow from its fixed set of identities, whose
// groups are fixed by the identity (IdentityGroups) and which carry no UID
// and no extra attributes:
//
//   - Only an identity that may do everything (admin; GrantsOf's all)
//     impersonates, as only system:masters may on a cluster without RBAC
//     bindings for it.
//   - The user must be an identity this server has a token for (a podsafe
//     name, or system:node:NODE for kubelet:NODE). kube-apiserver
//     impersonates any name, since its users are not objects, and leaves
//     the refusals to authorization; here that would let a name nobody can
//     authenticate as read everything (Authorize lets every identity read),
//     so the impersonation itself is refused, as an RBAC rule listing the
//     known users in resourceNames would refuse it.
//   - A group must be one the impersonated identity is in; asking for it
//     changes nothing. Any other group is refused rather than reported by
//     whoami as a membership no rule would honour.
//   - Impersonate-Uid and Impersonate-Extra-* are refused: there is nothing
//     to set them on.

// Impersonated resources, as kube-apiserver authorizes them.
var (
	grImpersonateUsers  = schema.GroupResource{Resource: "users"}
	grImpersonateGroups = schema.GroupResource{Resource: "groups"}
	grImpersonateUIDs   = schema.GroupResource{Group: authenticationv1.GroupName, Resource: "uids"}
	grImpersonateExtras = schema.GroupResource{Group: authenticationv1.GroupName, Resource: "userextras"}
)

// VerbImpersonate is the verb impersonation is authorized (and reviewed) as.
const VerbImpersonate = "impersonate"

// impersonationTarget is one thing a request asks to impersonate: a user,
// a group, an extra (Subresource is its key) or a UID, named by Name.
type impersonationTarget struct {
	Resource    schema.GroupResource
	Subresource string
	Name        string
}

// what renders the target's resource as a forbidden message names it.
func (t impersonationTarget) what() string {
	if t.Subresource != "" {
		return t.Resource.Resource + "/" + t.Subresource
	}
	return t.Resource.Resource
}

// impersonationRequest parses the Impersonate-* headers of h into the
// targets to authorize, user first, and the user asked for. It returns no
// targets when h asks for nothing, and a 400 when it asks for groups, extras
// or a UID without a user, as kube-apiserver does.
func impersonationRequest(h http.Header) (targets []impersonationTarget, user string, err error) {
	user = h.Get(authenticationv1.ImpersonateUserHeader)
	if user != "" {
		targets = append(targets, impersonationTarget{Resource: grImpersonateUsers, Name: user})
	}
	for _, g := range h.Values(authenticationv1.ImpersonateGroupHeader) {
		targets = append(targets, impersonationTarget{Resource: grImpersonateGroups, Name: g})
	}
	var extraHeaders []string
	for name := range h {
		if strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			extraHeaders = append(extraHeaders, name)
		}
	}
	sort.Strings(extraHeaders)
	for _, name := range extraHeaders {
		key := strings.ToLower(strings.TrimPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix))
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range h[name] {
			targets = append(targets, impersonationTarget{Resource: grImpersonateExtras, Subresource: key, Name: v})
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		targets = append(targets, impersonationTarget{Resource: grImpersonateUIDs, Name: uid})
	}
	if user == "" && len(targets) > 0 {
		var asked []string
		for _, t := range targets {
			asked = append(asked, fmt.Sprintf("%s %q", t.what(), t.Name))
		}
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("requested %s without impersonating a user: add %s (kubectl --as)",
			strings.Join(asked, ", "), authenticationv1.ImpersonateUserHeader))
	}
	return targets, user, nil
}

// mayImpersonate decides whether actor may impersonate t, the user asked
// for being user ("" when unknown, as in an access review of a group). It
// returns "" when allowed, else why not. known reports whether an identity
// can authenticate to this server. It is pure given known.
func mayImpersonate(actor string, t impersonationTarget, user string, known func(string) bool) (reason string) {
	if _, all := GrantsOf(actor); !all {
		return fmt.Sprintf("only %s acts as another identity", IdentityAdmin)
	}
	switch t.Resource {
	case grImpersonateUsers:
		if t.Name == "" || known(IdentityForUser(t.Name)) {
			return ""
		}
		return fmt.Sprintf("podsafe knows no identity %q: impersonate one of its identities (admin, scheduler, pet-controller, ..., kubelet:NODE or system:node:NODE)", t.Name)
	case grImpersonateGroups:
		if user != "" {
			groups := IdentityGroups(IdentityForUser(user))
			if slices.Contains(groups, t.Name) {
				return ""
			}
			return fmt.Sprintf("%s is in groups %s only; podsafe's identities have fixed groups", IdentityForUser(user), strings.Join(groups, ", "))
		}
		if t.Name == "" || slices.Contains([]string{GroupMasters, GroupNodes, GroupAuthenticated}, t.Name) {
			return ""
		}
		return fmt.Sprintf("no podsafe identity is in group %q; the groups are %s, %s and %s", t.Name, GroupMasters, GroupNodes, GroupAuthenticated)
	case grImpersonateUIDs:
		return "podsafe's identities have no UID"
	case grImpersonateExtras:
		return "podsafe's identities carry no extra attributes"
	}
	return fmt.Sprintf("%s cannot be impersonated", t.what())
}

// impersonationForbidden is kube-apiserver's 403 for an impersonation of t
// that actor may not make, reason appended as its authorizers append theirs.
func impersonationForbidden(actor string, t impersonationTarget, reason string) error {
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", actor, VerbImpersonate, t.what(), t.Resource.Group)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(t.Resource, t.Name, errors.New(msg))
}

// impersonate applies r's Impersonate-* headers to actor, the identity r
// authenticated as. It returns the identity r runs as (actor when nothing is
// asked) and whether it impersonates, or the 400 or 403 to answer. Every
// refusal is logged.
func (s *Server) impersonate(r *http.Request, actor string) (identity string, impersonated bool, err error) {
	targets, user, err := impersonationRequest(r.Header)
	if err != nil {
		return "", false, err
	}
	if len(targets) == 0 {
		return actor, false, nil
	}
	for _, t := range targets {
		if reason := mayImpersonate(actor, t, user, s.canAuthenticate); reason != "" {
			s.log.Info("impersonation refused", "identity", actor, "resource", t.what(), "name", t.Name, "reason", reason)
			return "", false, impersonationForbidden(actor, t, reason)
		}
	}
	// As kube-apiserver, nothing after this point sees the headers.
	for name := range r.Header {
		if strings.HasPrefix(name, "Impersonate-") {
			r.Header.Del(name)
		}
	}
	return IdentityForUser(user), true, nil
}

// canAuthenticate reports whether some token of Config.Tokens authenticates
// identity.
func (s *Server) canAuthenticate(identity string) bool {
	_, ok := s.identities[identity]
	return ok
}
