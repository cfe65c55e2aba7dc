package fencing

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Defaults of Config, in the controller clock's (possibly scaled) time.
const (
	DefaultThreshold = 20 * time.Second
	DefaultBudget    = 1
	DefaultResync    = 2 * time.Second
	DefaultWorkers   = 2
)

// Config configures a Controller. Zero values mean defaults.
type Config struct {
	// Client talks to the API as the fencing-controller identity. Required.
	Client kubernetes.Interface
	// Clock measures heart-beat age and paces resyncs and retries (nil: the
	// real clock). In a podsafe cluster it is the scaled cluster clock.
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Agents all run, in order, for every fence; a fence is confirmed only
	// when every agent confirmed it. At least one is required: with none,
	// nothing would stop the node and force deletion would be unsafe. Put
	// the storage agent before anything that relies on the node being cut
	// from its volumes: the controller breaks volume attachments only after
	// every agent confirmed (PS-15).
	Agents []Agent
	// Threshold is how long a node may go without renewing its lease before
	// it is a fencing candidate (default 20 s): its renewTime must be older
	// than Threshold on Clock, and the controller must not have seen it
	// change for Threshold either.
	Threshold time.Duration
	// Budget is how many nodes may be fenced and not yet unfenced at once
	// (default 1). A node beyond it waits, with an EventFenceDeferred.
	Budget int
	// Policy decides per pod whether it justifies fencing (default
	// DefaultPolicy{}).
	Policy Policy
	// Resync is how often every node is re-evaluated (default 2 s).
	Resync time.Duration
	// Workers is how many nodes are processed concurrently (default 2).
	Workers int

	_ struct{}
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.Policy == nil {
		c.Policy = DefaultPolicy{}
	}
	if c.Resync == 0 {
		c.Resync = DefaultResync
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c Config) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: Client is nil; pass a clientset for the fencing-controller identity", ErrInvalidConfig)
	case len(c.Agents) == 0:
		return fmt.Errorf("%w: Agents is empty; a fence needs at least one agent (power, storage, network) to confirm it", ErrInvalidConfig)
	case c.Threshold < 0:
		return fmt.Errorf("%w: Threshold %v is negative; use a positive duration or 0 for %v", ErrInvalidConfig, c.Threshold, DefaultThreshold)
	case c.Budget < 0:
		return fmt.Errorf("%w: Budget %d is negative; use a positive count or 0 for %d", ErrInvalidConfig, c.Budget, DefaultBudget)
	case c.Resync < 0:
		return fmt.Errorf("%w: Resync %v is negative; use a positive duration or 0 for %v", ErrInvalidConfig, c.Resync, DefaultResync)
	case c.Workers < 0:
		return fmt.Errorf("%w: Workers %d is negative; use a positive count or 0 for %d", ErrInvalidConfig, c.Workers, DefaultWorkers)
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		if a == nil {
			return fmt.Errorf("%w: Agents[%d] is nil", ErrInvalidConfig, i)
		}
		name := a.Name()
		if name == "" || seen[name] || strings.ContainsAny(name, ", \t\n") {
			return fmt.Errorf("%w: Agents[%d] has name %q; every agent needs a distinct, non-empty name without commas or spaces", ErrInvalidConfig, i, name)
		}
		seen[name] = true
	}
	return nil
}
