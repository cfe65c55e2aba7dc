package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// inflight bounds the requests a server works on at once, as
// kube-apiserver's --max-requests-inflight and
// --max-mutating-requests-inflight do: past the bound a request is refused at
// once with 429 and Retry-After, which client-go honours by waiting and
// retrying. Without a bound an overloaded server queues every request until
// most of them time out (504) and are retried, each retry adding to the
// queue: at thousands of kubelets the store then spends its time on requests
// nobody waits for any longer. Watches are long-running and not counted.
type inflight struct {
	readOnly chan struct{} // nil: no bound
	mutating chan struct{}
}

func newInflight(readOnly, mutating int) *inflight {
	in := &inflight{}
	if readOnly > 0 {
		in.readOnly = make(chan struct{}, readOnly)
	}
	if mutating > 0 {
		in.mutating = make(chan struct{}, mutating)
	}
	return in
}

// admit takes a slot for a resource request that is not a watch (watches
// are long-running and never counted), or writes 429 and reports false. The
// release function frees the slot. The admin identity is exempt, as
// upstream exempts system:masters, so an operator can still act on an
// overloaded cluster.
func (in *inflight) admit(w http.ResponseWriter, identity string, mutating bool) (release func(), ok bool) {
	if identity == IdentityAdmin {
		return func() {}, true
	}
	slots := in.readOnly
	if mutating {
		slots = in.mutating
	}
	if slots == nil {
		return func() {}, true
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	default:
		writeError(w, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1))
		return nil, false
	}
}

func mutatingMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
