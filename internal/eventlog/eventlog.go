// Package eventlog keeps client-go's event broadcasters quiet. Events are
// best effort: a write that fails while a fault cuts a component off, or
// one still queued when the component stops, is expected in a chaos run,
// and client-go would log each on stderr through klog (the event in full).
// The API calls a component makes, events included, are recorded in the
// history by its transport, so nothing is lost that a run judges.
package eventlog

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// Quiet returns ctx carrying a logger that discards: give it to
// record.WithContext, whose broadcaster and recorders log through the
// logger of the context they are given.
func Quiet(ctx context.Context) context.Context {
	return klog.NewContext(ctx, logr.Discard())
}
