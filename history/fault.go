package history

import (
	"maps"
	"slices"
	"strings"
)

// The structured record of a fault: what a fault interval says it did, in
// names the nemesis writes and the checkers read. They are defined here, the
// one package both sides import, so that neither parses the other's fault
// names or descriptions.

// FaultEffect says what a fault did to what it names: cut the links it
// lists, crashed, paused, moved the clock of or slowed the components it
// lists, powered nodes off or on, switched a failpoint on, froze watches.
type FaultEffect string

// The effects of a fault.
const (
	// EffectCut: the links listed were cut (a partition of any shape).
	EffectCut FaultEffect = "cut"
	// EffectKill: the components listed crashed; the heal restarts them.
	EffectKill FaultEffect = "kill"
	// EffectPause: the components listed were paused (SIGSTOP).
	EffectPause FaultEffect = "pause"
	// EffectClock: the clocks of the components listed were moved; one
	// that lists no component moved every node's clock.
	EffectClock FaultEffect = "clock"
	// EffectSlow: the store members listed applied committed changes late.
	EffectSlow FaultEffect = "slow"
	// EffectPowerOff: the nodes listed lost power (their kubelets and
	// containers stopped at once).
	EffectPowerOff FaultEffect = "power-off"
	// EffectPowerOn: the nodes listed were powered on (a point in time).
	EffectPowerOn FaultEffect = "power-on"
	// EffectFailpoint: the failpoint named by ParamFailpoint was on.
	EffectFailpoint FaultEffect = "failpoint"
	// EffectFreezeWatch: the listed components' watches were frozen while
	// everything else they did went on.
	EffectFreezeWatch FaultEffect = "freeze-watch"
)

// Effects lists every FaultEffect.
var Effects = []FaultEffect{EffectCut, EffectKill, EffectPause, EffectClock, EffectSlow, EffectPowerOff,
	EffectPowerOn, EffectFailpoint, EffectFreezeWatch}

// The keys of a fault's Params: its drawn parameters.
const (
	// ParamMember is the control-plane member acted on or isolated, by
	// index ("1").
	ParamMember = "member"
	// ParamLeader is the member that led when the fault was drawn.
	ParamLeader = "leader"
	// ParamNode is the node acted on or cut off.
	ParamNode = "node"
	// ParamZone is the topology zone cut off, ParamNodes how many nodes
	// it held.
	ParamZone  = "zone"
	ParamNodes = "nodes"
	// ParamOffset is a clock offset (a Go duration, either sign),
	// ParamPeriod a strobe's period and ParamDelay a slow member's apply
	// delay.
	ParamOffset = "offset"
	ParamPeriod = "period"
	ParamDelay  = "delay"
	// ParamDirection is the direction of a one-way cut: "outbound" (from
	// the member or node) or "inbound".
	ParamDirection = "direction"
	// ParamFailpoint is a failpoint's full name, ParamTerm what it was
	// switched on with.
	ParamFailpoint = "failpoint"
	ParamTerm      = "term"
	// The sides of a partition, as comma-separated hosts: ParamMinority
	// and ParamMajority, ParamA and ParamB, the ParamBridge member between
	// them, the ParamRing order of the members.
	ParamMinority = "minority"
	ParamMajority = "majority"
	ParamA        = "a"
	ParamB        = "b"
	ParamBridge   = "bridge"
	ParamRing     = "ring"
	// ParamComponent and ParamResource name what a frozen watch belongs
	// to and watches; ParamComponent also names the component a failpoint
	// was aimed at.
	ParamComponent = "component"
	ParamResource  = "resource"
)

// ParamKeys lists every key a fault's Params may have.
var ParamKeys = []string{ParamMember, ParamLeader, ParamNode, ParamZone, ParamNodes, ParamOffset, ParamPeriod,
	ParamDelay, ParamDirection, ParamFailpoint, ParamTerm, ParamMinority, ParamMajority, ParamA, ParamB,
	ParamBridge, ParamRing, ParamComponent, ParamResource}

// legacyEffects are the effects of the faults histories named before
// intervals recorded their effect, so that a history saved then is judged
// as it was. New faults record their effect and need no entry.
var legacyEffects = map[string]FaultEffect{
	"isolate-leader": EffectCut, "isolate-one": EffectCut, "halves": EffectCut, "majority-minority": EffectCut,
	"bridge": EffectCut, "ring": EffectCut, "one-way-member": EffectCut, "api-store": EffectCut,
	"partition-node": EffectCut, "partition-node-node": EffectCut, "partition-storage": EffectCut,
	"one-way-node": EffectCut, "partition-zone": EffectCut,
	"kill-member": EffectKill, "kill-leader": EffectKill, "kill-kubelet": EffectKill, "kill-scheduler": EffectKill,
	"kill-controller": EffectKill, "kill-controllers": EffectKill, "kill-fencing": EffectKill,
	"pause-kubelet": EffectPause, "pause-controller": EffectPause, "pause-scheduler": EffectPause,
	"clock-skew": EffectClock, "clock-jump": EffectClock, "clock-strobe": EffectClock,
	"slow-leader": EffectSlow, "slow-member": EffectSlow,
	"lose-node": EffectPowerOff, "power-off": EffectPowerOff, "power-on": EffectPowerOn,
	"failpoint": EffectFailpoint, "freeze-watch": EffectFreezeWatch,
}

// LegacyEffect is the effect of the fault named name in a history that did
// not record one ("" for a name it does not know).
func LegacyEffect(name string) FaultEffect { return legacyEffects[name] }

// FaultEffect is what the fault did: its recorded Effect, or for a history
// written before intervals recorded one, the effect its name stands for.
func (iv *Interval) FaultEffect() FaultEffect {
	if iv.Effect != "" {
		return iv.Effect
	}
	return LegacyEffect(iv.Name)
}

// FaultNodes are the nodes the fault acted on (their kubelets crashed,
// paused, clocks moved, powered off) or cut off: its recorded Nodes, or
// for a history written before intervals recorded them, its ParamNode and
// the nodes of the kubelets ("kubelet/<node>") among its targets and
// components.
func (iv *Interval) FaultNodes() []string {
	if len(iv.Nodes) > 0 {
		return iv.Nodes
	}
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if n := iv.Params[ParamNode]; n != "" {
		add(n)
	}
	for _, names := range [][]string{iv.Targets, iv.Components} {
		for _, t := range names {
			if n, ok := strings.CutPrefix(t, "kubelet/"); ok {
				add(n)
			}
		}
	}
	return out
}

// Everywhere reports a fault that names nothing it acted on: a clock fault
// of that kind moved every node's clock.
func (iv *Interval) Everywhere() bool {
	return len(iv.Nodes) == 0 && len(iv.Components) == 0 && len(iv.Targets) == 0 && len(iv.Links) == 0
}

// ParamString renders the fault's Params as "key=value" pairs in key
// order, space separated ("" when it has none), for reports.
func (iv *Interval) ParamString() string {
	pairs := make([]string, 0, len(iv.Params))
	for _, k := range slices.Sorted(maps.Keys(iv.Params)) {
		pairs = append(pairs, k+"="+iv.Params[k])
	}
	return strings.Join(pairs, " ")
}

// intervalOf is the interval a start event opens, from start to end.
func intervalOf(ev NemesisEvent, start, end int64) Interval {
	return Interval{
		ID: ev.ID, Name: ev.Name, Description: ev.Description, Targets: ev.Targets,
		Effect: ev.Effect, Links: ev.Links, Components: ev.Components, Nodes: ev.Nodes, Params: ev.Params,
		Start: start, End: end, StartWall: ev.Wall,
	}
}
