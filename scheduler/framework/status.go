package framework

import (
	"errors"
	"strings"
)

// Code is the outcome of running a plugin. Expected rejections are codes, not
// errors: only Error means something went wrong.
type Code int

// The codes a plugin may return.
const (
	// Success means the plugin accepts the pod (or the node).
	Success Code = iota
	// Error is an internal failure; the pod is retried after back-off.
	Error
	// Unschedulable means the pod does not fit, but preemption on this node
	// might make it fit.
	Unschedulable
	// UnschedulableAndUnresolvable means the pod does not fit and removing pods
	// from the node cannot change that; preemption skips the node.
	UnschedulableAndUnresolvable
	// Skip from PreFilter or PreScore means the plugin has nothing to do for
	// this pod; its Filter or Score is then not called.
	Skip
)

var codeNames = []string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Skip"}

// String returns the name of the code.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Unknown"
}

// Status is the result of a plugin call. A nil *Status means Success.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus returns a status with code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an internal error; nil gives nil (Success).
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the code; nil is Success.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether s is Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether s is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether s is Unschedulable or UnschedulableAndUnresolvable.
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the human-readable reasons.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin names the plugin that returned the status, once the framework has
// recorded it.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records the plugin that returned s and returns s. A status
// that already names the plugin is not written to, so a plugin may return
// one shared status from filters running at once.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil && s.plugin != name {
		s.plugin = name
	}
	return s
}

// AsError returns the status as an error: nil for Success and Skip, the
// wrapped error for Error, and an error naming the reasons otherwise.
func (s *Status) AsError() error {
	switch s.Code() {
	case Success, Skip:
		return nil
	case Error:
		if s.err != nil {
			return s.err
		}
	}
	return errors.New(s.Message())
}

// String formats the status for logs.
func (s *Status) String() string {
	if s == nil {
		return "Success"
	}
	msg := s.code.String()
	if s.plugin != "" {
		msg += " (" + s.plugin + ")"
	}
	if len(s.reasons) > 0 {
		msg += ": " + s.Message()
	}
	return msg
}
