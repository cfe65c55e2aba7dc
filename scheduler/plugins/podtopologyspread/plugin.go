// Package podtopologyspread spreads pods over topology domains (zones, nodes,
// any node label) per spec.topologySpreadConstraints: DoNotSchedule
// constraints filter, ScheduleAnyway constraints score, and pods without
// constraints of their own get the cluster's default constraints.
package podtopologyspread

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "PodTopologySpread"

// Well-known topology keys of the built-in defaults.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelZone     = "topology.kubernetes.io/zone"
)

// DefaultingType selects where default constraints come from.
type DefaultingType string

const (
	// SystemDefaulting uses SystemDefaultConstraints (the default).
	SystemDefaulting DefaultingType = "System"
	// ListDefaulting uses Args.DefaultConstraints; an empty list disables
	// defaulting.
	ListDefaulting DefaultingType = "List"
)

// SystemDefaultConstraints are the built-in cluster defaults (TS-9): at most
// 3 more pods of a workload per node and 5 more per zone, both preferences.
var SystemDefaultConstraints = []corev1.TopologySpreadConstraint{
	{MaxSkew: 3, TopologyKey: LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway},
	{MaxSkew: 5, TopologyKey: LabelZone, WhenUnsatisfiable: corev1.ScheduleAnyway},
}

// Args configure the plugin. The zero value means system defaulting.
type Args struct {
	// DefaultingType is System (zero value) or List.
	DefaultingType DefaultingType
	// DefaultConstraints apply with List defaulting; they carry no
	// labelSelector: the selector comes from the pod's owner.
	DefaultConstraints []corev1.TopologySpreadConstraint
	// DefaultSelector returns the selector of the workloads pod belongs to,
	// or nil if it belongs to none (nil func: OwnerSelector). The scheduler
	// passes Workloads.Selector, which sees Services too.
	DefaultSelector func(pod *corev1.Pod) labels.Selector

	_ struct{}
}

// Validate reports the first problem with the arguments.
func (a *Args) Validate() error {
	switch a.DefaultingType {
	case "", SystemDefaulting, ListDefaulting:
	default:
		return fmt.Errorf("podTopologySpread.defaultingType %q: use %q or %q", a.DefaultingType, SystemDefaulting, ListDefaulting)
	}
	for i, c := range a.DefaultConstraints {
		switch {
		case c.MaxSkew <= 0:
			return fmt.Errorf("podTopologySpread.defaultConstraints[%d].maxSkew must be greater than 0", i)
		case c.TopologyKey == "":
			return fmt.Errorf("podTopologySpread.defaultConstraints[%d].topologyKey is required", i)
		case c.LabelSelector != nil:
			return fmt.Errorf("podTopologySpread.defaultConstraints[%d].labelSelector must be empty: the selector comes from the pod's owner", i)
		case c.MinDomains != nil && c.WhenUnsatisfiable != corev1.DoNotSchedule:
			return fmt.Errorf("podTopologySpread.defaultConstraints[%d].minDomains needs whenUnsatisfiable DoNotSchedule", i)
		}
	}
	return nil
}

// PodTopologySpread is the plugin.
type PodTopologySpread struct {
	handle          framework.Handle
	defaults        []corev1.TopologySpreadConstraint
	defaultSelector func(*corev1.Pod) labels.Selector
	// systemDefaulted is set with System defaulting: scoring by the
	// built-in defaults does not require nodes to carry every key.
	systemDefaulted bool
	counters        counterCache
}

var (
	_ framework.PreFilterPlugin     = &PodTopologySpread{}
	_ framework.FilterPlugin        = &PodTopologySpread{}
	_ framework.PreFilterExtensions = &PodTopologySpread{}
	_ framework.PreScorePlugin      = &PodTopologySpread{}
	_ framework.ScorePlugin         = &PodTopologySpread{}
	_ framework.ScoreNormalizer     = &PodTopologySpread{}
)

// New returns a factory for the plugin with args.
func New(args Args) framework.PluginFactory {
	return func(h framework.Handle) (framework.Plugin, error) {
		if err := args.Validate(); err != nil {
			return nil, err
		}
		pl := &PodTopologySpread{handle: h, defaultSelector: args.DefaultSelector}
		if args.DefaultingType == ListDefaulting {
			pl.defaults = args.DefaultConstraints
		} else {
			pl.defaults, pl.systemDefaulted = SystemDefaultConstraints, true
		}
		if pl.defaultSelector == nil {
			pl.defaultSelector = OwnerSelector
		}
		return pl, nil
	}
}

// Name implements framework.Plugin.
func (*PodTopologySpread) Name() string { return Name }
