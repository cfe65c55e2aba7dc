package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/report"
)

func newServeCmd() *cobra.Command {
	var store, addr string
	var maxRenders int
	var renderWait time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "browse the store of runs over HTTP",
		Long: `serve lists the runs of the store, newest first, with their verdicts and
links to report.html, results.json, history.jsonl (or history.jsonl.gz),
linearizability.html and podsafe.log, and serves the files beneath the store (nothing outside it).

A run without a report.html gets one rendered on its first request and kept
beside its history (` + report.ServeCacheFile + `) until the history or
results.json changes. Rendering holds the whole history in memory, so at most
--max-renders render at once; other requests wait up to --render-wait, then
get 503 with Retry-After.`,
		Example: `  podsafe serve
  podsafe serve --store /tmp/runs --addr 127.0.0.1:9090`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxRenders < 1 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--max-renders must be at least 1, got %d", maxRenders)}
			}
			if renderWait <= 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--render-wait must be positive, got %s", renderWait)}
			}
			srv, err := report.NewServer(store, report.WithMaxRenders(maxRenders), report.WithRenderWait(renderWait))
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("listening on %s: %w", addr, err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "serving %s at http://%s/\n", store, ln.Addr())
			return serve(cmd.Context(), ln, srv)
		},
	}
	cmd.Flags().StringVar(&store, "store", "store", "directory of runs to serve")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().IntVar(&maxRenders, "max-renders", report.DefaultMaxRenders, "reports rendered at once (each holds its run's history in memory)")
	cmd.Flags().DurationVar(&renderWait, "render-wait", report.DefaultRenderWait, "how long a request waits for a report to render before a 503")
	return cmd
}

// serve answers on ln until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return &exitError{code: exitCrashed, err: fmt.Errorf("serving: %w", err)}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return &exitError{code: exitCrashed, err: fmt.Errorf("shutting down: %w", err)}
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return &exitError{code: exitCrashed, err: fmt.Errorf("serving: %w", err)}
	}
	return nil
}
