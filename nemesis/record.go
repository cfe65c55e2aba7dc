package nemesis

import (
	"slices"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/target"
)

// What a schedule records of an injection beyond what the fault returns:
// its effect and the nodes it touched, in the history's terms (package
// history defines them once for the nemesis and the checkers).

// Effecter is implemented by a fault whose effect is not the one its first
// needed capability stands for (see EffectOf).
type Effecter interface {
	Effect() history.FaultEffect
}

// capabilityEffects maps what a fault needs to what it does with it.
var capabilityEffects = map[target.Capability]history.FaultEffect{
	target.Network:   history.EffectCut,
	target.Kill:      history.EffectKill,
	target.Pause:     history.EffectPause,
	target.Clock:     history.EffectClock,
	target.SlowApply: history.EffectSlow,
	target.Power:     history.EffectPowerOff,
	target.Failpoint: history.EffectFailpoint,
}

// EffectOf is the effect f records: its own (Effecter), else that of the
// first capability it needs.
func EffectOf(f Fault) history.FaultEffect {
	if e, ok := f.(Effecter); ok {
		return e.Effect()
	}
	for _, c := range f.Needs() {
		if e, ok := capabilityEffects[c]; ok {
			return e
		}
	}
	return ""
}

// nodesOf lists, sorted, the nodes inj acted on: the node it drew, those
// of the components it names, and those whose hosts are an end of a link
// it cut.
func nodesOf(t target.Target, inj Injection) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	add(inj.Params[history.ParamNode])
	byHost := map[string]string{}
	for _, c := range t.Components() {
		if c.Node == "" {
			continue
		}
		if slices.Contains(inj.Components, c.Name) {
			add(c.Node)
		}
		if c.Role == target.RoleKubelet {
			byHost[c.Host] = c.Node
		}
	}
	for _, l := range inj.Links {
		add(byHost[l.From])
		add(byHost[l.To])
	}
	slices.Sort(out)
	return out
}

// startEvent is the history line that opens injection id of f.
func startEvent(id uint64, f Fault, t target.Target, inj Injection) history.NemesisEvent {
	return history.NemesisEvent{ID: id, Name: f.Name(), Description: inj.Description, Phase: history.PhaseStart,
		Targets: inj.Targets, Effect: EffectOf(f), Links: inj.Links, Components: inj.Components,
		Nodes: nodesOf(t, inj), Params: inj.Params}
}
