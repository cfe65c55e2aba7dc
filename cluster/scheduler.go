package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/scheduler"
)

// SchedulerHost is the scheduler's host on the simulated network, so
// partitions can cut it off like any other process.
const SchedulerHost = "scheduler"

// ErrSchedulerRunning and ErrSchedulerStopped report a StartScheduler or
// StopScheduler that found the scheduler already in the wanted state.
var (
	ErrSchedulerRunning = errors.New("scheduler already running")
	ErrSchedulerStopped = errors.New("scheduler not running")
)

// schedulerRun is one running scheduler.
type schedulerRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startSchedulerIfEnabled starts the scheduler when Config.Scheduler is set.
func (c *Cluster) startSchedulerIfEnabled() error {
	if !c.cfg.Scheduler {
		return nil
	}
	return c.StartScheduler()
}

// StartScheduler starts the scheduler with its own identity and network
// host, reaching the API through the cluster's network and using the
// cluster's clock. It runs until StopScheduler or Close.
func (c *Cluster) StartScheduler() error {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if c.sched != nil {
		return ErrSchedulerRunning
	}
	rc := c.RESTConfig(apiserver.IdentityScheduler, ClientOptions{Host: SchedulerHost})
	s, err := scheduler.New(scheduler.Config{
		RESTConfig:        rc,
		Clock:             c.ComponentClock(ComponentScheduler),
		Logger:            c.log.With("component", "scheduler"),
		DisablePreemption: c.cfg.DisablePreemption,
	})
	if err != nil {
		return fmt.Errorf("building scheduler: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &schedulerRun{cancel: cancel, done: make(chan struct{})}
	c.sched = run
	go func() {
		defer close(run.done)
		if err := s.Run(ctx); err != nil {
			c.log.Error("scheduler stopped", "err", err)
		}
	}()
	return nil
}

// StopScheduler stops the scheduler as a crash would: whatever it was doing
// is abandoned; a later StartScheduler rebuilds its state from the API.
func (c *Cluster) StopScheduler() error {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	run := c.sched
	if run == nil {
		return ErrSchedulerStopped
	}
	c.sched = nil
	run.cancel()
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stopping scheduler: %w", context.DeadlineExceeded)
	}
	return nil
}

// SchedulerRunning reports whether the scheduler runs.
func (c *Cluster) SchedulerRunning() bool {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	return c.sched != nil
}

// stopSchedulerOnClose stops a running scheduler, if any.
func (c *Cluster) stopSchedulerOnClose() {
	if err := c.StopScheduler(); err != nil && !errors.Is(err, ErrSchedulerStopped) {
		c.log.Warn("stopping scheduler", "err", err)
	}
}
