// Package specs runs podsafe scenarios and holds the ginkgo suites that prove
// the guarantees. Run is the plain function behind both `podsafe test` and the
// specs: a scenario is data; running it builds a cluster, drives a workload and
// a nemesis, records the history, checks it and writes the results.
package specs

import (
	"errors"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
	"github.com/podsafe/podsafe/workload"
)

// ErrInvalidScenario: a scenario field is out of range or unknown.
var ErrInvalidScenario = errors.New("invalid scenario")

// Workloads lists the workloads Run knows, with one line each.
func Workloads() map[string]string { return workload.Describe() }

// Bugs lists the planted bugs a scenario can switch on, with one line each.
// The bug zoo (Zoo) registers its bugs here as well.
var Bugs = map[string]string{}

// BugFailpoints maps each planted bug that is a failpoint to the failpoint's
// full name; a run switches it on (return(true)) once the cluster is up.
// Such bugs need a failpoint build (make bugzoo, make build-failpoints).
var BugFailpoints = map[string]string{}

// DefaultPodTimeScale is the time scale of scenarios whose workload runs
// pods, unless the scenario sets one.
const DefaultPodTimeScale = 50

// Scenario is one test run, as data: what cluster, which workload, which
// faults, for how long, from which seed.
type Scenario struct {
	Name     string           `json:"name"`
	Topology cluster.Topology `json:"topology"`
	// Nodes and Zones generate the topology's nodes when it lists none, as
	// the CLI's --nodes and --zones do: Nodes nodes named node-0…, spread
	// round-robin over Zones zones (zone-a…; default 1). A scale scenario
	// need not list thousands of nodes. Defaults replaces them by the
	// nodes they stand for, so a saved scenario.json lists every node.
	Nodes    int    `json:"nodes,omitempty"`
	Zones    int    `json:"zones,omitempty"`
	Workload string `json:"workload"`
	// Nemesis names faults or groups of faults (see `podsafe list`); empty or
	// "none" runs without faults.
	Nemesis         []string `json:"nemesis"`
	NemesisInterval Duration `json:"nemesisInterval"`
	// NemesisCompose, when set, composes the nemesis as Jepsen's compose
	// does (see nemesis.Part): each part injects its own faults, one at a
	// time, on its own timer, so that faults of different parts overlap.
	// Nemesis is then left empty.
	NemesisCompose []NemesisPart `json:"nemesisCompose,omitempty"`
	// Checkers, when set, are the only checkers that judge the run (names
	// as podsafe list shows them), and each must find something to judge:
	// one whose input the history lacks answers Unknown. Empty: every
	// checker whose input the history holds.
	Checkers []string `json:"checkers,omitempty"`
	// Duration is the time limit of the workload phase, in wall time.
	Duration    Duration `json:"duration"`
	TimeScale   float64  `json:"timeScale"`
	Seed        uint64   `json:"seed"`
	Concurrency int      `json:"concurrency"`
	// Rate bounds the operations the workload's processes start per wall
	// second, all together, as Jepsen's --rate (staggered, see
	// workload.Limiter); 0 means no bound. `podsafe test` sets its --rate
	// unless a scenario file is given.
	Rate float64 `json:"rate,omitempty"`
	// Knobs tune the workload, and each part of a mix, by workload name:
	// the fields of its configuration that are plain data, by the names
	// `podsafe list` shows (knobs: {spread: {sets: 4, interval: 5s}}). A
	// tuned variant of a workload is a scenario file, not new code.
	Knobs workload.Knobs `json:"knobs,omitempty"`
	// Keys is how many register keys are live at once (the register
	// workload's knob keys, given one way or the other).
	Keys    int  `json:"keys,omitempty"`
	Durable bool `json:"durable,omitempty"`
	// WatchWindow is how many recent store events each embedded member
	// keeps for resuming watches (cluster.Config.WatchWindow; 0: 10,000);
	// small, it makes watchers reach its floor (410 Gone, relists).
	WatchWindow int `json:"watchWindow,omitempty"`
	// Bugs are planted bugs to switch on (see Bugs).
	Bugs []string `json:"bugs,omitempty"`
	// Fencing runs the fencing controller (PS-14) even when the workload
	// does not ask for it.
	Fencing bool `json:"fencing,omitempty"`
	// FenceAgents names the fence agents in order (storage, power,
	// network); empty means the target's default (embedded: storage, then
	// power; kube, which has no storage server: power).
	FenceAgents []string `json:"fenceAgents,omitempty"`
	// BypassAuthority makes the API servers log their authority refusals
	// and let the requests through (cluster.Config.BypassAuthority): the
	// bug zoo's controller bugs need it, since the API would refuse their
	// force deletions.
	BypassAuthority bool `json:"bypassAuthority,omitempty"`
	// Target is the system under test: TargetEmbedded (default, podsafe's
	// own control plane in process) or TargetKube (a real control plane
	// of OS processes; see Kube).
	Target string `json:"target,omitempty"`
	// Kube configures the kube target (Target "kube"); Topology.Members is
	// its number of etcd members.
	Kube *KubeScenario `json:"kube,omitempty"`
	// Kubeconfig is the existing cluster of Target "kubeconfig": podsafe
	// registers its nodes there (tainted, so only its workloads land on
	// them) and injects only the faults of what it owns.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Raft are the raft timings and snapshot sizes of the embedded
	// control plane's members. Run draws every field left zero from the
	// seed (cluster.RaftParams.Draw), so that runs explore snapshots,
	// compaction and timing; the fields given stand. A run's scenario.json
	// holds them all, so a rerun from it runs the same.
	Raft cluster.RaftParams `json:"raft,omitzero"`
	// Policies switch on the control plane's optional behaviours (the
	// lost-node Failed policy, pod GC's threshold, preemption off, kubelet
	// eviction thresholds); see Policies.
	Policies Policies `json:"policies,omitzero"`
	// Steps, when set, make the run scripted: they run in order instead of
	// the workload's random operations and the nemesis's random faults
	// (the kube target only). The workload still names what the history
	// follows.
	Steps []Step `json:"steps,omitempty"`

	// given holds the defaulted fields (JSON paths, see flagOf) that a
	// file or a flag set explicitly: Defaults leaves a given zero alone,
	// for Validate to refuse, rather than silently running the default.
	given map[string]bool

	_ struct{}
}

// flagOf maps the scenario fields that Defaults fills in when zero, by JSON
// path, to the `podsafe test` flag that sets each, so that an error names
// both.
var flagOf = map[string]string{
	"duration":         "time-limit",
	"nemesisInterval":  "nemesis-interval",
	"timeScale":        "time-scale",
	"concurrency":      "concurrency",
	"keys":             "keys",
	"topology.members": "members",
	"kube.apiservers":  "apiservers",
}

// SetGiven records that the scenario field at path (a JSON path such as
// "duration" or "topology.members") was given explicitly, on the command
// line or in a file. Defaults then leaves it alone even when it is zero,
// and Validate refuses a zero that is out of range instead of running the
// default. Paths other than those Defaults fills in are ignored.
func (s *Scenario) SetGiven(path string) {
	if _, ok := flagOf[path]; !ok {
		return
	}
	if s.given == nil {
		s.given = map[string]bool{}
	}
	s.given[path] = true
}

// Given reports whether the field at path was given explicitly (SetGiven).
func (s *Scenario) Given(path string) bool { return s.given[path] }

// defaulted reports whether Defaults may fill in the field at path: it was
// not given explicitly.
func (s *Scenario) defaulted(path string) bool { return !s.given[path] }

// fieldRef names the field at path for an error: the flag, and the
// scenario field too where its name differs ("--time-limit (scenario
// duration)").
func fieldRef(path string) string {
	flag, ok := flagOf[path]
	switch {
	case !ok:
		return "scenario " + path
	case flag == path:
		return "--" + flag
	default:
		return "--" + flag + " (scenario " + path + ")"
	}
}

// ParseScenario reads a scenario from YAML or JSON, strictly: an unknown
// field is an error. The defaulted fields the document sets (even to zero)
// are recorded as given (see SetGiven).
func ParseScenario(b []byte) (Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return s, err
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return s, err
	}
	for path := range flagOf {
		m := raw
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			m, _ = m[p].(map[string]any)
		}
		if _, ok := m[parts[len(parts)-1]]; ok {
			s.SetGiven(path)
		}
	}
	return s, nil
}

// Targets of Scenario.Target.
const (
	TargetEmbedded   = history.TargetEmbedded
	TargetKube       = "kube"
	TargetKubeconfig = "kubeconfig"
)

// Defaults fills zero fields with the defaults of `podsafe test`, except
// those given explicitly (SetGiven, ParseScenario): a zero given is left for
// Validate to refuse.
func (s *Scenario) Defaults() {
	if s.Workload == "" {
		s.Workload = "register"
	}
	if s.Name == "" {
		s.Name = s.Workload
		if len(s.Nemesis) > 0 {
			s.Name += "-" + strings.ReplaceAll(strings.Join(s.Nemesis, "+"), ",", "+")
		}
		if len(s.NemesisCompose) > 0 {
			s.Name += "-compose"
			for _, p := range s.NemesisCompose {
				s.Name += "-" + strings.ReplaceAll(strings.Join(p.Faults, "+"), ",", "+")
			}
		}
	}
	if s.Nodes > 0 && s.Zones >= 0 && len(s.Topology.Nodes) == 0 {
		members := s.Topology.Members
		if members == 0 && s.defaulted("topology.members") {
			members = 3
		}
		s.Topology = cluster.DefaultTopology(members, s.Nodes, max(1, s.Zones))
		s.Nodes, s.Zones = 0, 0
	}
	switch {
	case s.Topology.Members != 0 || !s.defaulted("topology.members"):
	case len(s.Topology.Nodes) > 0:
		// Nodes the scenario lists are kept as they are (names, labels,
		// taints); only the members are the default.
		s.Topology.Members = 3
	default:
		nodes, zones := 0, 1
		if w, err := s.TunedWorkload(); err == nil && w.Needs().Kubelets {
			// A workload that runs pods gets the CLI's default nodes, in
			// as many zones as it needs.
			nodes, zones = max(3, w.Needs().MinNodes), max(1, w.Needs().Zones)
		}
		s.Topology = cluster.DefaultTopology(3, nodes, zones)
	}
	if s.NemesisInterval == 0 && s.defaulted("nemesisInterval") {
		s.NemesisInterval = Duration(5 * time.Second)
	}
	if s.Duration == 0 && s.defaulted("duration") {
		s.Duration = Duration(30 * time.Second)
	}
	if s.Target == "" {
		s.Target = TargetEmbedded
	}
	if s.Target == TargetKube {
		if s.Kube == nil {
			s.Kube = &KubeScenario{}
		}
		if s.Kube.APIServers == 0 && s.defaulted("kube.apiservers") {
			s.Kube.APIServers = 1
		}
		if s.Kube.Network == "" {
			s.Kube.Network = kube.NetworkAuto
		}
		if s.Kube.Version == "" {
			s.Kube.Version = binaries.DefaultKubernetesVersion
		}
		if s.Kube.Etcd == "" && s.Kube.Version == binaries.DefaultKubernetesVersion {
			s.Kube.Etcd = binaries.DefaultEtcdVersion
		}
		if s.Kube.Timings == (kube.Timings{}) {
			s.Kube.Timings = kube.DefaultTimings()
		}
		// Real components run in real time.
		if s.TimeScale == 0 && s.defaulted("timeScale") {
			s.TimeScale = 1
		}
	}
	if s.Target == TargetKubeconfig && s.TimeScale == 0 && s.defaulted("timeScale") {
		// An existing cluster runs in real time.
		s.TimeScale = 1
	}
	if s.TimeScale == 0 && s.defaulted("timeScale") {
		// The store alone runs in real time; a workload with kubelets and
		// controllers has grace periods, leases and tolerations worth
		// minutes, so its cluster clock runs faster by default.
		s.TimeScale = 1
		if w, err := s.TunedWorkload(); err == nil && w.Needs().Kubelets {
			s.TimeScale = DefaultPodTimeScale
		}
	}
	if s.Concurrency == 0 && s.defaulted("concurrency") {
		s.Concurrency = 2 * s.Topology.Members
	}
	if _, ok := s.Knobs[registerWorkload][registerKeys]; ok && s.Keys == 0 && s.defaulted("keys") {
		if w, err := s.TunedWorkload(); err == nil {
			if r, ok := w.(*workload.Register); ok {
				s.Keys = r.Keys
			}
		}
	}
	if s.Keys == 0 && s.defaulted("keys") {
		s.Keys = 5
	}
}

// The register workload's name and its knob that Scenario.Keys gives too.
const (
	registerWorkload = "register"
	registerKeys     = "keys"
)

// TunedWorkload is a fresh value of the scenario's workload with its knobs
// set (Knobs), validated.
func (s *Scenario) TunedWorkload() (workload.Workload, error) {
	w, err := workload.Lookup(s.Workload)
	if err != nil {
		return nil, err
	}
	if err := workload.Tune(w, s.Knobs); err != nil {
		return nil, err
	}
	return w, nil
}

// Validate reports the first problem, naming the field and the fix: the
// flag and the scenario field where their names differ.
func (s *Scenario) Validate() error {
	if s.Name != "" { // Defaults names an unnamed scenario
		if err := ValidName(s.Name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
		}
	}
	if m := s.Topology.Members; m != 1 && m != 3 && m != 5 {
		return fmt.Errorf("%w: %s must be 1, 3 or 5, got %d", ErrInvalidScenario, fieldRef("topology.members"), m)
	}
	if err := validNodes(s.Topology.Nodes); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	// Defaults turned valid ones into topology nodes; these are left.
	switch {
	case s.Nodes < 0 || s.Zones < 0:
		return fmt.Errorf("%w: scenario nodes and zones are counts, got nodes %d and zones %d", ErrInvalidScenario, s.Nodes, s.Zones)
	case s.Nodes > 0:
		return fmt.Errorf("%w: scenario nodes and topology.nodes are both given: generate the nodes or list them, not both", ErrInvalidScenario)
	case s.Zones > 0:
		return fmt.Errorf("%w: scenario zones is given without nodes: it spreads the nodes that nodes generates", ErrInvalidScenario)
	}
	w, err := s.TunedWorkload()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	if k, ok := s.Knobs[registerWorkload][registerKeys]; ok && s.Keys != w.(*workload.Register).Keys {
		return fmt.Errorf("%w: the register keys are given twice, %s %d and knobs.register.keys %v: give them once", ErrInvalidScenario, fieldRef("keys"), s.Keys, k)
	}
	if need := w.Needs(); need.MinNodes > len(s.Topology.Nodes) {
		return fmt.Errorf("%w: workload %s needs at least %d nodes, the topology has %d (--nodes)", ErrInvalidScenario, s.Workload, need.MinNodes, len(s.Topology.Nodes))
	} else if need.Zones > 0 && zonesOf(s.Topology) < need.Zones {
		return fmt.Errorf("%w: workload %s needs nodes in at least %d zones, the topology has %d (--zones)", ErrInvalidScenario, s.Workload, need.Zones, zonesOf(s.Topology))
	}
	if _, err := nemesis.Lookup(s.Nemesis...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	if err := s.validCompose(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	if err := s.Policies.validate(s.Target); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	if err := validCheckers(s.Checkers); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	if err := s.Topology.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	if s.Duration <= 0 {
		return fmt.Errorf("%w: %s must be > 0, got %s", ErrInvalidScenario, fieldRef("duration"), s.Duration)
	}
	if s.NemesisInterval <= 0 {
		return fmt.Errorf("%w: %s must be > 0, got %s", ErrInvalidScenario, fieldRef("nemesisInterval"), s.NemesisInterval)
	}
	if s.Concurrency < 1 || s.Concurrency > 1000 {
		return fmt.Errorf("%w: %s must be between 1 and 1000, got %d", ErrInvalidScenario, fieldRef("concurrency"), s.Concurrency)
	}
	if !(s.TimeScale >= 1) || math.IsInf(s.TimeScale, 1) { // NaN fails >=
		return fmt.Errorf("%w: %s must be at least 1 and finite, got %g", ErrInvalidScenario, fieldRef("timeScale"), s.TimeScale)
	}
	if s.Keys < 1 {
		return fmt.Errorf("%w: %s must be at least 1, got %d", ErrInvalidScenario, fieldRef("keys"), s.Keys)
	}
	if s.WatchWindow < 0 || s.WatchWindow > 0 && s.Target != "" && s.Target != TargetEmbedded {
		return fmt.Errorf("%w: %s sizes the embedded store's watch window: a positive count of events (0 or absent: 10000), on the embedded target only; got %d on target %q", ErrInvalidScenario, fieldRef("watchWindow"), s.WatchWindow, s.Target)
	}
	if !(s.Rate >= 0) || math.IsInf(s.Rate, 1) { // NaN fails >=
		return fmt.Errorf("%w: --rate (scenario rate) must be operations per second, 0 (no bound) or more and finite, got %g", ErrInvalidScenario, s.Rate)
	}
	if s.Rate > 0 && len(s.Steps) > 0 {
		return fmt.Errorf("%w: --rate (scenario rate) bounds the workload's operations, and a scripted run runs steps instead: drop the rate", ErrInvalidScenario)
	}
	if len(s.Steps) > 0 && s.Target != TargetKube {
		return fmt.Errorf("%w: scripted steps run on the kube target only (--target kube), not %q", ErrInvalidScenario, s.Target)
	}
	for i, st := range s.Steps {
		if err := st.validate(i); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
		}
	}
	if s.Kube != nil {
		if err := kubelet.ValidPodList(s.Kube.Kubelet.PodList); err != nil {
			return fmt.Errorf("%w: kube.kubelet.podList: %w", ErrInvalidScenario, err)
		}
		for node, i := range s.Kube.Kubelet.APIServers {
			if i < 0 || i >= max(1, s.Kube.APIServers) {
				return fmt.Errorf("%w: kube.kubelet.apiservers: node %s pinned to API server %d of %d", ErrInvalidScenario, node, i, max(1, s.Kube.APIServers))
			}
			if !slices.ContainsFunc(s.Topology.Nodes, func(n cluster.NodeSpec) bool { return n.Name == node }) {
				return fmt.Errorf("%w: kube.kubelet.apiservers: no node %s in the topology", ErrInvalidScenario, node)
			}
		}
	}
	if s.Kubeconfig != "" && s.Target != TargetKubeconfig {
		return fmt.Errorf("%w: a kubeconfig is for the target kubeconfig (an existing cluster), not %q", ErrInvalidScenario, s.Target)
	}
	// The fields given must fit together and with whatever Run draws for
	// the others (Draw fits what it draws to what is given, whatever the
	// seed).
	if err := s.Raft.Draw(mrand.New(mrand.NewPCG(0, 0))).Validate(); err != nil {
		return fmt.Errorf("%w: scenario raft: %w", ErrInvalidScenario, err)
	}
	if !s.Raft.IsZero() && s.Target != "" && s.Target != TargetEmbedded {
		return fmt.Errorf("%w: scenario raft sets the embedded control plane's raft; the %s target runs its own etcd (drop raft)", ErrInvalidScenario, s.Target)
	}
	switch s.Target {
	case "", TargetEmbedded:
		if s.Kube != nil {
			return fmt.Errorf("%w: kube settings given for the embedded target (--target kube?)", ErrInvalidScenario)
		}
	case TargetKubeconfig:
		switch {
		case s.Kubeconfig == "":
			return fmt.Errorf("%w: the kubeconfig target needs --kubeconfig FILE (an existing cluster)", ErrInvalidScenario)
		case s.Kube != nil:
			return fmt.Errorf("%w: kube settings (--apiservers, --kube-version, --network) are for --target kube; an existing cluster is what it is", ErrInvalidScenario)
		case s.TimeScale != 1:
			return fmt.Errorf("%w: an existing cluster runs at time scale 1, got --time-scale %g", ErrInvalidScenario, s.TimeScale)
		case len(s.Bugs) > 0:
			return fmt.Errorf("%w: planted bugs are in podsafe's own control plane; an existing cluster runs its own (drop --bug)", ErrInvalidScenario)
		case s.BypassAuthority:
			return fmt.Errorf("%w: bypassAuthority applies to podsafe's own API servers only", ErrInvalidScenario)
		}
		if _, err := os.Stat(s.Kubeconfig); err != nil {
			return fmt.Errorf("%w: kubeconfig: %w", ErrInvalidScenario, err)
		}
	case TargetKube:
		if s.TimeScale != 1 {
			return fmt.Errorf("%w: the kube target runs real components at time scale 1, got --time-scale %g", ErrInvalidScenario, s.TimeScale)
		}
		if len(s.Bugs) > 0 {
			return fmt.Errorf("%w: planted bugs are in podsafe's own control plane; the kube target runs upstream's (drop --bug)", ErrInvalidScenario)
		}
		if s.BypassAuthority {
			return fmt.Errorf("%w: bypassAuthority applies to podsafe's own API servers only", ErrInvalidScenario)
		}
		if m := s.Topology.Members; m != 1 && m != 3 && m != 5 {
			return fmt.Errorf("%w: the kube target runs 1, 3 or 5 etcd members, got --members %d", ErrInvalidScenario, m)
		}
		if a := s.Kube.APIServers; a < 1 || a > 3 {
			return fmt.Errorf("%w: %s must be between 1 and 3 (kube-apiservers of the kube target), got %d", ErrInvalidScenario, fieldRef("kube.apiservers"), a)
		}
	default:
		return fmt.Errorf("%w: target %q: choose embedded, kube or kubeconfig", ErrInvalidScenario, s.Target)
	}
	agents := cluster.FenceAgentNames
	switch s.Target {
	case TargetKube:
		agents = kube.FenceAgentNames
	case TargetKubeconfig:
		// podsafe installs no storage in an existing cluster.
		agents = slices.DeleteFunc(slices.Clone(kube.FenceAgentNames), func(a string) bool { return a == kube.FenceAgentStorage })
	}
	for _, a := range s.FenceAgents {
		if !slices.Contains(agents, a) {
			if s.Target != TargetEmbedded && slices.Contains(cluster.FenceAgentNames, a) {
				return fmt.Errorf("%w: fence agent %q is not on the %s target, which has no podsafe storage server; choose from %s", ErrInvalidScenario, a, s.Target, strings.Join(agents, ", "))
			}
			return fmt.Errorf("%w: fence agent %q is unknown; choose from %s", ErrInvalidScenario, a, strings.Join(agents, ", "))
		}
	}
	for _, b := range s.Bugs {
		if _, ok := Bugs[b]; !ok {
			return fmt.Errorf("%w: bug %q is unknown; choose one of %s", ErrInvalidScenario, b, keys(Bugs))
		}
		if _, fp := BugFailpoints[b]; fp && !nemesis.FailpointsCompiled() {
			return fmt.Errorf("%w: bug %q is a failpoint, and this build's failpoints are inert: run it in a failpoint build (make bugzoo, or bin/podsafe-failpoints from make build-failpoints)", ErrInvalidScenario, b)
		}
	}
	return nil
}

// validNodes checks the topology's node names and labels as the API server
// would check the Node objects, so that a bad one is refused before the
// cluster starts rather than failing its registration.
func validNodes(nodes []cluster.NodeSpec) error {
	seen := map[string]int{}
	for i, n := range nodes {
		field := fmt.Sprintf("topology.nodes[%d]", i)
		if n.Name == "" {
			return fmt.Errorf("%s.name is empty", field)
		}
		if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
			return fmt.Errorf("%s.name %q is not a valid node name (a DNS-1123 subdomain): %s", field, n.Name, strings.Join(errs, "; "))
		}
		if j, ok := seen[n.Name]; ok {
			return fmt.Errorf("%s.name %q is the name of topology.nodes[%d] too: node names must be unique", field, n.Name, j)
		}
		seen[n.Name] = i
		for _, k := range sortStrings(slices.Collect(maps.Keys(n.Labels))) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Errorf("%s.labels: key %q: %s", field, k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(n.Labels[k]); len(errs) > 0 {
				return fmt.Errorf("%s.labels[%s]: value %q: %s", field, k, n.Labels[k], strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

// zonesOf counts the distinct zones of t's nodes.
func zonesOf(t cluster.Topology) int {
	zones := map[string]bool{}
	for _, n := range t.Nodes {
		if z := n.Labels[cluster.LabelZone]; z != "" {
			zones[z] = true
		}
	}
	return len(zones)
}

func (s *Scenario) hasBug(name string) bool {
	for _, b := range s.Bugs {
		if b == name {
			return true
		}
	}
	return false
}

func keys(m map[string]string) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(sortStrings(ks), ", ")
}

// validCheckers refuses a checkers list naming a checker podsafe does not
// have, or one twice.
func validCheckers(names []string) error {
	var known []string
	for _, c := range checker.Catalog() {
		known = append(known, c.Name)
	}
	for i, n := range names {
		if !slices.Contains(known, n) {
			return fmt.Errorf("--checkers (scenario checkers): unknown checker %q; choose among %s", n, strings.Join(known, ", "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("--checkers (scenario checkers): checker %q is named twice", n)
		}
	}
	return nil
}
