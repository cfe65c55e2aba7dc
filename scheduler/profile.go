package scheduler

import (
	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/interpodaffinity"
	"github.com/podsafe/podsafe/scheduler/plugins/nodeaffinity"
	"github.com/podsafe/podsafe/scheduler/plugins/nodename"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/plugins/nodeunschedulable"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/plugins/tainttoleration"
)

// Plugins is the default profile for cfg, cheapest filters first so a node
// is rejected early; preemption only when enabled.
func Plugins(cfg Config) []framework.PluginSpec {
	specs := []framework.PluginSpec{
		{Factory: nodeunschedulable.New},
		{Factory: nodename.New},
		{Factory: tainttoleration.New},
		{Factory: nodeaffinity.New},
		{Factory: noderesources.NewFit},
		{Factory: podtopologyspread.New(cfg.PodTopologySpread), Weight: 2},
		{Factory: interpodaffinity.New, Weight: 2},
		{Factory: noderesources.NewLeastAllocated, Weight: 1},
	}
	if !cfg.DisablePreemption {
		specs = append(specs, framework.PluginSpec{Factory: defaultpreemption.New(cfg.Preemption)})
	}
	return specs
}
