package runset

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	var s Set
	stopped := make(chan string, 3)
	run := func(name string) func(context.Context) {
		return func(ctx context.Context) { <-ctx.Done(); stopped <- name }
	}
	for _, n := range []string{"b", "a"} {
		if err := s.Start(n, run(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start("a", run("a")); !errors.Is(err, ErrRunning) {
		t.Fatalf("second start of a: %v, want ErrRunning", err)
	}
	if got := s.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("names %v", got)
	}
	if err := s.Stop("a", 0); err != nil {
		t.Fatal(err)
	}
	if got := <-stopped; got != "a" {
		t.Fatalf("stopped %s, want a", got)
	}
	if s.Running("a") || !s.Running("b") {
		t.Fatalf("running a %v b %v, want false true", s.Running("a"), s.Running("b"))
	}
	if err := s.Stop("a", 0); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("stop of a stopped run: %v, want ErrNotRunning", err)
	}
	// A run that ignores its context: Stop gives up after the timeout.
	release := make(chan struct{})
	if err := s.Start("stuck", func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop("stuck", time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop of a stuck run: %v, want a deadline error", err)
	}
	close(release)
	s.StopAll()
	if got := <-stopped; got != "b" {
		t.Fatalf("stopped %s, want b", got)
	}
	if len(s.Names()) != 0 {
		t.Fatalf("names after StopAll: %v", s.Names())
	}
}
