// Command podsafe runs Jepsen-style chaos and conformance tests of the
// Kubernetes pod lifecycle against an embedded control plane, and checks saved
// histories.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes, as Jepsen's: the verdict of the run. Past the verdicts, as
// sysexits.h: 64 (EX_USAGE) a bad flag or scenario, refused before anything
// ran; 65 (EX_DATAERR) podsafe check was given a history it cannot read.
const (
	exitValid   = 0
	exitInvalid = 1
	exitUnknown = 2
	exitCrashed = 3
	exitUsage   = 64
	exitCorrupt = 65
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func main() {
	ctx, stop := notifyInterrupts(context.Background(), os.Stderr)
	defer stop()
	servePprof()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "podsafe:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "podsafe:", err)
	os.Exit(exitUsage)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "podsafe",
		Short: "Jepsen-style chaos and conformance tests for the Kubernetes pod lifecycle",
		Long: `podsafe runs a small but real control plane (a raft-replicated store behind a
Kubernetes-compatible API server) under injected faults, records every operation
in a history on disk, and checks it against the guarantees of the pod lifecycle.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTestCmd(), newCheckCmd(), newClusterCmd(), newListCmd(), newDeleteCmd(), newBugzooCmd(), newMutationCmd(), newReportCmd(), newServeCmd(), newKubeCmd())
	return root
}
