package kubelet

import (
	"errors"
	"testing"
)

// TestParseScriptExitRange: an exit code outside 0..255, or not a number, is
// an invalid script; the bounds themselves are accepted.
func TestParseScriptExitRange(t *testing.T) {
	for _, bad := range []string{"exit=-1", "exit=256", "exit=x"} {
		if _, err := ParseScript(bad); !errors.Is(err, ErrInvalidScript) {
			t.Errorf("ParseScript(%q) = %v, want ErrInvalidScript", bad, err)
		}
	}
	for src, want := range map[string]int{"exit=0": 0, "exit=255": 255} {
		if s, err := ParseScript(src); err != nil || s.Exit != want {
			t.Errorf("ParseScript(%q) = exit %d, %v; want exit %d", src, s.Exit, err, want)
		}
	}
}
