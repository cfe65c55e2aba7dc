package apiserver

import (
	"crypto/sha256"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// authenticate returns the identity of the request's bearer token, or a 401
// Status when the token is missing or unknown.
func (s *Server) authenticate(r *http.Request) (string, error) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return "", apierrors.NewUnauthorized("no bearer token: send Authorization: Bearer TOKEN")
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", apierrors.NewUnauthorized("the Authorization header is not a bearer token: send Authorization: Bearer TOKEN")
	}
	token = strings.TrimSpace(token)
	identity, ok := s.tokens[tokenDigest(token)]
	if !ok {
		return "", apierrors.NewUnauthorized("the bearer token is not known to this server")
	}
	return identity, nil
}

// authorize enforces Authorize's decision on req: nil when allowed, the 403
// otherwise. Every refusal is logged. With Config.BypassAuthority (a planted
// bug) refusals are logged and then ignored.
func (s *Server) authorize(req Request) error {
	d := Authorize(req)
	if d.Allowed {
		return nil
	}
	name := req.Name
	if name == "" && req.Object != nil {
		if m, err := metaOf(req.Object); err == nil {
			name = m.GetName()
		}
	}
	if s.cfg.BypassAuthority {
		s.log.Warn("authority bypassed", "identity", req.Identity, "verb", req.Verb, "resource", req.Resource.String(),
			"subresource", req.Subresource, "namespace", req.Namespace, "name", name, "rule", d.Rule)
		return nil
	}
	s.log.Info("refused", "identity", req.Identity, "verb", req.Verb, "resource", req.Resource.String(),
		"subresource", req.Subresource, "namespace", req.Namespace, "name", name, "rule", d.Rule)
	return forbidden(req.Resource, name, d)
}

// tokenDigest names a bearer token in Server.tokens. Tokens are looked up by
// their SHA-256 digest rather than compared one by one (which cost a third of
// the server's CPU with 5,000 kubelets): a map lookup on the digest takes time
// that depends on the digest, not on how much of a known token the request
// guessed right, so the timing still leaks nothing about the tokens.
func tokenDigest(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// tokenTable is Config.Tokens keyed by digest.
func tokenTable(tokens map[string]string) map[[sha256.Size]byte]string {
	t := make(map[[sha256.Size]byte]string, len(tokens))
	for tok, id := range tokens {
		t[tokenDigest(tok)] = id
	}
	return t
}
