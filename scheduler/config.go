package scheduler

import (
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
)

// DefaultSchedulerName is the spec.schedulerName this scheduler serves when
// Config.SchedulerName is empty; pods with an empty schedulerName are served
// too.
const DefaultSchedulerName = "default-scheduler"

// Config configures a Scheduler. Zero values mean defaults.
type Config struct {
	// Client talks to the API; if nil, one is built from RESTConfig.
	Client kubernetes.Interface
	// RESTConfig is used when Client is nil.
	RESTConfig *rest.Config
	// SchedulerName is the spec.schedulerName served (default
	// DefaultSchedulerName).
	SchedulerName string
	// Clock drives back-off and timestamps (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the scheduler's log (nil: discard).
	Logger *slog.Logger
	// DisablePreemption turns the preemption PostFilter off (PR-13).
	DisablePreemption bool
	// Preemption bounds the candidate search.
	Preemption defaultpreemption.Args
	// PodTopologySpread configures the cluster default constraints (TS-9).
	PodTopologySpread podtopologyspread.Args
	// PercentageOfNodesToScore stops the feasibility search once this share
	// of the nodes (at least 100) passed the filters; 0 adapts it to the
	// cluster size, 100 searches all nodes.
	PercentageOfNodesToScore int32
	// InitialBackoff and MaxBackoff bound the retry back-off of an
	// unschedulable pod (defaults 1 s and 10 s), doubled per attempt.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// ResyncPeriod of the informers (default 0: none).
	ResyncPeriod time.Duration

	_ struct{}
}

// DefaultConfig returns a Config with every default filled in except the
// client.
func DefaultConfig() Config {
	c := Config{}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.SchedulerName == "" {
		c.SchedulerName = DefaultSchedulerName
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 10 * time.Second
	}
	d := defaultpreemption.DefaultArgs()
	if c.Preemption.MinCandidateNodesAbsolute == 0 {
		c.Preemption.MinCandidateNodesAbsolute = d.MinCandidateNodesAbsolute
	}
	if c.Preemption.MinCandidateNodesPercentage == 0 {
		c.Preemption.MinCandidateNodesPercentage = d.MinCandidateNodesPercentage
	}
}

// Validate reports the first problem, naming the field and the fix.
func (c *Config) Validate() error {
	switch {
	case c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100:
		return fmt.Errorf("%w: percentageOfNodesToScore %d must lie in 0..100 (0 adapts to cluster size)", ErrInvalidConfig, c.PercentageOfNodesToScore)
	case c.InitialBackoff < 0 || c.MaxBackoff < 0:
		return fmt.Errorf("%w: back-off durations must not be negative", ErrInvalidConfig)
	case c.MaxBackoff != 0 && c.InitialBackoff > c.MaxBackoff:
		return fmt.Errorf("%w: initialBackoff %s exceeds maxBackoff %s", ErrInvalidConfig, c.InitialBackoff, c.MaxBackoff)
	case c.Preemption.MinCandidateNodesPercentage < 0 || c.Preemption.MinCandidateNodesPercentage > 100:
		return fmt.Errorf("%w: preemption.minCandidateNodesPercentage %d must lie in 0..100", ErrInvalidConfig, c.Preemption.MinCandidateNodesPercentage)
	case c.Preemption.MinCandidateNodesAbsolute < 0:
		return fmt.Errorf("%w: preemption.minCandidateNodesAbsolute must not be negative", ErrInvalidConfig)
	}
	if err := c.PodTopologySpread.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
