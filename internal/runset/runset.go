// Package runset runs named components as goroutines that can be stopped
// the way a crash stops a process: their context is cancelled and whatever
// they were doing is abandoned. The embedded cluster's controllers and
// kubelets, and the kube target's kubelets, are run by it.
package runset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors of Start and Stop.
var (
	// ErrRunning: a component of that name already runs.
	ErrRunning = errors.New("already running")
	// ErrNotRunning: no component of that name runs.
	ErrNotRunning = errors.New("not running")
)

// Set is a set of running components by name. The zero value is ready.
type Set struct {
	mu   sync.Mutex
	runs map[string]*run
}

type run struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs f in a goroutine under name until Stop cancels its context.
func (s *Set) Start(name string, f func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs[name] != nil {
		return fmt.Errorf("%s: %w", name, ErrRunning)
	}
	if s.runs == nil {
		s.runs = map[string]*run{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{cancel: cancel, done: make(chan struct{})}
	s.runs[name] = r
	go func() {
		defer close(r.done)
		f(ctx)
	}()
	return nil
}

// Stop cancels name's context and waits until f returned, at most timeout
// (zero: as long as it takes). The name is free to Start again at once.
func (s *Set) Stop(name string, timeout time.Duration) error {
	s.mu.Lock()
	r := s.runs[name]
	delete(s.runs, name)
	s.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%s: %w", name, ErrNotRunning)
	}
	r.cancel()
	if timeout <= 0 {
		<-r.done
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("stopping %s: %w", name, context.DeadlineExceeded)
	}
}

// Running reports whether name runs.
func (s *Set) Running(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[name] != nil
}

// Names lists the running components, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.runs))
	for n := range s.runs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// StopAll cancels every component at once and waits until all returned.
func (s *Set) StopAll() {
	s.mu.Lock()
	runs := s.runs
	s.runs = nil
	s.mu.Unlock()
	for _, r := range runs {
		r.cancel()
	}
	for _, r := range runs {
		<-r.done
	}
}
