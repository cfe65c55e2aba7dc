package apiserver

import (
	"crypto/subtle"
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
	// Compare against every token in constant time so the answer's timing
	// does not leak which prefix matched.
	identity := ""
	for known, id := range s.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(known), []byte(token)) == 1 {
			identity = id
		}
	}
	if identity == "" {
		return "", apierrors.NewUnauthorized("the bearer token is not known to this server")
	}
	return identity, nil
}
