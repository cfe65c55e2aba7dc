package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// ErrConfig reports an invalid Config; New wraps it with the details.
var ErrConfig = errors.New("apiserver: invalid config")

// optimisticLockMessage is the message clients (and people) know a failed
// compare-and-swap by.
const optimisticLockMessage = "the object has been modified; please apply your changes to the latest version and try again"

// storeError turns a raftstore error about resource gr / name into the
// Status error kube-apiserver would send.
func storeError(err error, gr schema.GroupResource, name string) error {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return nil
	case errors.As(err, &status):
		return err
	case errors.Is(err, raftstore.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, raftstore.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, raftstore.ErrConflict):
		return conflict(gr, name)
	case errors.Is(err, raftstore.ErrTooOld):
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %v", err))
	case errors.Is(err, raftstore.ErrUnavailable), errors.Is(err, raftstore.ErrClosed):
		// No Retry-After: client-go would then retry on its own, up to ten
		// times, hiding the outage from the caller's own retry policy.
		return apierrors.NewServiceUnavailable(fmt.Sprintf("the store is unavailable, the request was not applied: %v", err))
	case errors.Is(err, raftstore.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError(fmt.Sprintf("the outcome of the request is unknown: %v", err), 0)
	case errors.Is(err, context.Canceled):
		return apierrors.NewTimeoutError("the request was canceled; its outcome is unknown", 0)
	case errors.Is(err, raftstore.ErrInvalid):
		return apierrors.NewBadRequest(err.Error())
	}
	return apierrors.NewInternalError(err)
}

// conflict is the 409 of a failed compare-and-swap.
func conflict(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New(optimisticLockMessage))
}

// statusOf returns the Status body of err, with kind and apiVersion set.
func statusOf(err error) metav1.Status {
	var st metav1.Status
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st = apiStatus.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return st
}

// writeError writes err as a Status response.
func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	writeJSON(w, int(st.Code), st)
}

// forbidden is the 403 of an authority refusal.
func forbidden(gr schema.GroupResource, name string, d Decision) error {
	return apierrors.NewForbidden(gr, name, errors.New(d.Reason))
}

// methodNotAllowed is the 405 for a verb a resource does not serve, with a
// message that says what to do instead.
func methodNotAllowed(message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Message: message,
	}}
}

// invalidListOptions is kube-apiserver's 422 for list or watch parameters
// that do not go together: an Invalid ListOptions with a cause per field.
func invalidListOptions(errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
}

// patchFailed is the 422 of a patch that does not apply to the object (a
// JSON patch's test that fails, a path that is not there). kube-apiserver
// answers it with neither kind nor name nor cause, which kubectl prints as
// `The  "" is invalid`; this one names the object and carries the failure as
// a cause on the field the operation aimed at (field: "" for a merge
// patch), so the user learns which object and which operation.
func patchFailed(gk schema.GroupKind, name, field, message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid: %s", gk.Kind, name, message),
		Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name,
			Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: message}}},
	}}
}
