package eventlog

import (
	"context"
	"testing"

	"k8s.io/klog/v2"
)

func TestQuiet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	q := Quiet(ctx)
	if klog.FromContext(q).Enabled() {
		t.Error("the quiet context's logger logs")
	}
	cancel()
	if q.Err() == nil {
		t.Error("the quiet context outlives its parent")
	}
}
