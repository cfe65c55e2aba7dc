package fpprobe

import (
	"os"
	"testing"
)

// TestFailpointProbe: the probe finds the markers live in a failpoint build
// (make test-failpoints sets PODSAFE_FAILPOINTS=1) and inert in an ordinary
// one.
func TestFailpointProbe(t *testing.T) {
	want := os.Getenv("PODSAFE_FAILPOINTS") == "1"
	if got := Live(); got != want {
		t.Fatalf("Live() = %v in a build with PODSAFE_FAILPOINTS=%q", got, os.Getenv("PODSAFE_FAILPOINTS"))
	}
}
