package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// schedulers holds the running scheduler of each cluster; kept here rather
// than in Cluster so the scheduler's wiring stays in this file.
var schedulers sync.Map // *Cluster -> *schedulerRun

// schedulerMu serializes StartScheduler and StopScheduler.
var schedulerMu sync.Mutex

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
	schedulerMu.Lock()
	defer schedulerMu.Unlock()
	if _, ok := schedulers.Load(c); ok {
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
	schedulers.Store(c, run)
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
	schedulerMu.Lock()
	defer schedulerMu.Unlock()
	v, ok := schedulers.LoadAndDelete(c)
	if !ok {
		return ErrSchedulerStopped
	}
	run := v.(*schedulerRun)
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
	_, ok := schedulers.Load(c)
	return ok
}

// stopSchedulerOnClose stops a running scheduler, if any.
func (c *Cluster) stopSchedulerOnClose() {
	if err := c.StopScheduler(); err != nil && !errors.Is(err, ErrSchedulerStopped) {
		c.log.Warn("stopping scheduler", "err", err)
	}
}
