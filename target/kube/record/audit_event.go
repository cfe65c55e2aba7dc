package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The audit API's kind and version, and the stages of a request's audit
// events (k8s.io/apiserver/pkg/apis/audit/v1). k8s.io/apiserver is not in
// podsafe's module graph, so the few fields read here are restated.
const (
	AuditKind       = "Event"
	AuditAPIVersion = "audit.k8s.io/v1"

	StageRequestReceived  = "RequestReceived"
	StageResponseStarted  = "ResponseStarted"
	StageResponseComplete = "ResponseComplete"
	StagePanic            = "Panic"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event that the conversion
// reads, with the JSON names kube-apiserver writes.
type AuditEvent struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Level is the audit level the policy gave the request: Metadata,
	// Request or RequestResponse (bodies are logged from Request on).
	Level   string `json:"level"`
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	// RequestURI is the request's path and query as the client sent it.
	RequestURI string `json:"requestURI"`
	// Verb is the Kubernetes verb of a resource request, the lower-cased
	// HTTP method of any other.
	Verb string `json:"verb"`
	// User is who authenticated; ImpersonatedUser, when set, is who the
	// request acted as.
	User             AuditUser  `json:"user"`
	ImpersonatedUser *AuditUser `json:"impersonatedUser,omitempty"`
	SourceIPs        []string   `json:"sourceIPs,omitempty"`
	UserAgent        string     `json:"userAgent,omitempty"`
	// ObjectRef names the resource a resource request addressed; nil for
	// other requests.
	ObjectRef      *AuditObjectRef `json:"objectRef,omitempty"`
	ResponseStatus *AuditStatus    `json:"responseStatus,omitempty"`
	// RequestObject and ResponseObject are the bodies, as JSON (logged
	// from levels Request and RequestResponse).
	RequestObject  json.RawMessage `json:"requestObject,omitempty"`
	ResponseObject json.RawMessage `json:"responseObject,omitempty"`
	// The times are the API server's wall clock, in microseconds.
	RequestReceivedTimestamp time.Time         `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time         `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`
}

// AuditUser is an authenticated user (authentication/v1 UserInfo).
type AuditUser struct {
	Username string   `json:"username,omitempty"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// AuditObjectRef is the object a request addressed (audit/v1
// ObjectReference). For a create the API server fills Name (and UID,
// ResourceVersion) from the request's object.
type AuditObjectRef struct {
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
}

// AuditStatus is the response's status (a meta/v1 Status): the HTTP code
// always, and the reason and message of a failure.
type AuditStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Code    int    `json:"code,omitempty"`
}

// ErrNotAuditEvent: a JSON object that is not an audit.k8s.io/v1 Event.
var ErrNotAuditEvent = errors.New("not an audit.k8s.io/v1 Event")

// ParseAuditLine decodes one line of a JSON audit log. It fails on
// anything but a whole audit.k8s.io/v1 Event.
func ParseAuditLine(line []byte) (AuditEvent, error) {
	var ev AuditEvent
	line = bytes.TrimSpace(line)
	if err := json.Unmarshal(line, &ev); err != nil {
		return AuditEvent{}, fmt.Errorf("decoding audit event: %w", err)
	}
	if ev.Kind != AuditKind || ev.APIVersion != AuditAPIVersion {
		return AuditEvent{}, fmt.Errorf("%w: kind %q, apiVersion %q", ErrNotAuditEvent, ev.Kind, ev.APIVersion)
	}
	return ev, nil
}
