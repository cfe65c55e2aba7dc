package main

import (
	"path/filepath"
	"testing"
)

// TestBadMutationFlags: podsafe mutation refuses bad input at once, naming
// the flag and what it takes.
func TestBadMutationFlags(t *testing.T) {
	store := t.TempDir()
	gremlins := filepath.Join(t.TempDir(), "no-gremlins")
	mut := func(args ...string) []string { return append([]string{"mutation", "--store", store}, args...) }
	expectUsage(t, []usageCase{
		{"per-package 0", mut("--gremlins", gremlins, "--per-package", "0"), "--per-package must be at least 1, got 0"},
		{"per-guarantee -1", mut("--gremlins", gremlins, "--per-guarantee", "-1"), "--per-guarantee must be 0 (none) or more, got -1"},
		{"kill rate over 100", mut("--gremlins", gremlins, "--min-kill-rate", "120"), "--min-kill-rate is a percentage from 0 to 100, got 120"},
		{"negative checker rate", mut("--gremlins", gremlins, "--min-checker-rate", "-1"), "--min-checker-rate is a percentage from 0 to 100, got -1"},
		{"no gremlins", mut(), "--gremlins is required: the gremlins v0.6.0 binary"},
		{"gremlins missing", mut("--gremlins", gremlins), "gremlins binary: stat " + gremlins + ": no such file or directory (make mutation installs gremlins v0.6.0)"},
		{"package without scenarios", mut("--gremlins", gremlins, "--packages", "./checker"), `--packages: package "checker" has no mutation scenarios; choose among`},
		{"space separated packages", mut("--gremlins", gremlins, "--packages", "./raftstore ./nope"), `package "nope" has no mutation scenarios`},
	})
}
