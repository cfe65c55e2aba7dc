package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/workload"
)

// DefaultRate is the --rate of podsafe test: Jepsen's etcd test runs at
// 200 operations per second too. A 30 s register run then records about
// 6,000 operations — plenty for the checkers, thousands across every fault
// window — in a history of a few MB, where an unbounded one on a fast
// machine writes hundreds. Scenarios run from Go (the specs) set their own
// rate and default to none.
const DefaultRate = 200

type testFlags struct {
	scenarioFile    string
	workload        string
	nemesis         []string
	nemesisCompose  []string
	nemesisInterval time.Duration
	checkers        []string
	timeLimit       time.Duration
	timeScale       float64
	concurrency     int
	seed            uint64
	members         int
	nodes           int
	zones           int
	keys            int
	knobs           []string
	rate            float64
	compress        bool
	testCount       int
	store           string
	durable         bool
	bugs            []string
	fencing         bool
	fenceAgents     []string
	bypassAuthority bool
	raft            map[string]string
	policies        map[string]string
	target          string
	kubeconfig      string
	kube            kubeFlags
}

func newTestCmd() *cobra.Command {
	cmd, _ := newTestCommand()
	return cmd
}

// newTestCommand returns the test command and the flags it fills in.
func newTestCommand() (*cobra.Command, *testFlags) {
	f := &testFlags{}
	cmd := &cobra.Command{
		Use:   "test",
		Short: "run a workload under a nemesis on the embedded cluster (or a real one: --target kube) and check the history",
		Example: `  podsafe test --workload register --nemesis partition --time-limit 30s
  podsafe test --workload register --nemesis isolate-leader --seed 42 --concurrency 8
  podsafe test --scenario my-scenario.yaml
  podsafe test --workload pets --nemesis-compose partition@6s --nemesis-compose kill-kubelet,pause-kubelet@4s --nemesis-compose clock
  podsafe test --target kube --workload pets --nemesis partition-node,kill --time-limit 5m
  podsafe test --kubeconfig ~/.kube/config --workload pets --nemesis partition-node,kill-kubelet --time-limit 3m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTest(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenarioFile, "scenario", "", "read the scenario from a YAML or JSON file (flags given too override it)")
	fl.StringVar(&f.workload, "workload", "register", "workload to run (see podsafe list)")
	fl.StringSliceVar(&f.nemesis, "nemesis", []string{"partition"}, "faults or fault groups, comma separated, or none (see podsafe list)")
	fl.StringArrayVar(&f.nemesisCompose, "nemesis-compose", nil, "one part of a composed nemesis: faults or groups, comma separated, then optionally @ and the part's mean interval (kill-kubelet,pause-kubelet@4s; default --nemesis-interval); repeat for each part. Parts inject on timers of their own, so their faults overlap; replaces --nemesis")
	fl.StringSliceVar(&f.checkers, "checkers", nil, "only these checkers judge the run, comma separated (see podsafe list); each must find something to judge, or the verdict is unknown (default: every checker whose input the history holds)")
	fl.DurationVar(&f.nemesisInterval, "nemesis-interval", 5*time.Second, "mean time between nemesis operations")
	fl.DurationVar(&f.timeLimit, "time-limit", 30*time.Second, "how long the workload runs")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "the cluster clock runs this many times faster than wall time (default 1 for register, 50 for workloads that run pods)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "client processes (default 2 × members)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of every random choice (default: random, printed)")
	fl.IntVar(&f.members, "members", 3, "control-plane members: 1, 3 or 5")
	fl.IntVar(&f.nodes, "nodes", 3, "worker nodes")
	fl.IntVar(&f.zones, "zones", 1, "zones the nodes are spread over")
	fl.IntVar(&f.keys, "keys", 5, "register keys live at once")
	fl.StringArrayVar(&f.knobs, "knob", nil, "tune the workload: workload.knob=value, the value in YAML (spread.sets=4, replicas.interval=5s, lifecycle.variants=[crash,probe]); repeat for each knob; the knobs are listed by podsafe list. A --scenario file's knobs stand unless a --knob sets the same one")
	fl.Float64Var(&f.rate, "rate", DefaultRate, "at most this many workload operations per second, across all clients, staggered (Jepsen's --rate); 0: no bound. A --scenario file's rate (default none) stands unless --rate is given")
	fl.BoolVar(&f.compress, "compress", true, "once the run is checked, replace history.jsonl by history.jsonl.gz (check, report and serve read either); --compress=false keeps it plain")
	fl.IntVar(&f.testCount, "test-count", 1, "run the test this many times (seeds seed, seed+1, …)")
	fl.StringVar(&f.store, "store", "store", "directory for results")
	fl.BoolVar(&f.durable, "durable", false, "store raft's log on disk (raft-boltdb) instead of in memory")
	fl.StringSliceVar(&f.bugs, "bug", nil, "switch on a planted bug (see podsafe list); the checkers must catch it")
	fl.BoolVar(&f.fencing, "fencing", false, "run the fencing controller (PS-14) whatever the workload")
	fl.StringSliceVar(&f.fenceAgents, "fence-agents", nil, "fence agents in order: storage, power, network (default storage,power; implies --fencing)")
	fl.BoolVar(&f.bypassAuthority, "bypass-authority", false, "API servers log their authority refusals (who may force delete) and let the requests through; for planted controller bugs")
	fl.StringToStringVar(&f.raft, "raft", nil, "fix raft parameters of the embedded control plane, name=value, comma separated (heartbeatTimeout=700ms,snapshotThreshold=64; names as in a scenario's raft); those not given are drawn from the seed")
	fl.StringToStringVar(&f.policies, "policy", nil, "switch on control-plane policies, name=value, comma separated (failPodsOnLostNode=true,terminatedPodThreshold=3,disablePreemption=true,evictionHard=512Mi,storageFencingTokens=true; names as in a scenario's policies), over a --scenario file's")
	fl.StringVar(&f.target, "target", specs.TargetEmbedded, "system under test: embedded (podsafe's own control plane, in process), kube (real etcd, kube-apiserver, kube-scheduler, kube-controller-manager processes; --members is etcd members; make kube-binaries first) or kubeconfig (an existing cluster: --kubeconfig)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "run on an existing cluster: podsafe registers its nodes there (tainted, so only its workloads land on them), runs its workloads and faults only what it owns (its nodes' kill, pause, power and links); implies --target kubeconfig")
	f.kube.add(cmd)
	return cmd, f
}

func scenarioFromFlags(cmd *cobra.Command, f *testFlags) (specs.Scenario, error) {
	var s specs.Scenario
	if f.scenarioFile != "" {
		b, err := os.ReadFile(f.scenarioFile)
		if err != nil {
			return s, fmt.Errorf("reading scenario: %w", err)
		}
		if s, err = specs.ParseScenario(b); err != nil {
			return s, fmt.Errorf("scenario %s: %w", f.scenarioFile, err)
		}
	}
	set := func(name string) bool { return f.scenarioFile == "" || cmd.Flags().Changed(name) }
	// A flag given explicitly is never replaced by a default, not even when
	// it is zero: Validate refuses what is out of range.
	for flag, field := range map[string]string{
		"time-limit": "duration", "nemesis-interval": "nemesisInterval", "time-scale": "timeScale",
		"concurrency": "concurrency", "keys": "keys", "members": "topology.members", "apiservers": "kube.apiservers",
	} {
		if cmd.Flags().Changed(flag) {
			s.SetGiven(field)
		}
	}
	if set("workload") {
		s.Workload = f.workload
	}
	if set("nemesis") {
		s.Nemesis = f.nemesis
	}
	switch {
	case cmd.Flags().Changed("nemesis-compose"):
		parts, err := parseCompose(f.nemesisCompose)
		if err != nil {
			return s, err
		}
		s.NemesisCompose = parts
		if !cmd.Flags().Changed("nemesis") {
			s.Nemesis = nil // the default --nemesis, or the file's: the parts replace it
		}
	case cmd.Flags().Changed("nemesis"):
		s.NemesisCompose = nil // a file's composed nemesis, replaced by the flag's
	}
	if set("nemesis-interval") {
		s.NemesisInterval = specs.Duration(f.nemesisInterval)
	}
	if set("time-limit") {
		s.Duration = specs.Duration(f.timeLimit)
	}
	if set("time-scale") {
		s.TimeScale = f.timeScale
	}
	if cmd.Flags().Changed("concurrency") {
		s.Concurrency = f.concurrency // not given: 2 × members
	}
	if set("seed") {
		s.Seed = f.seed
	}
	if set("checkers") {
		s.Checkers = f.checkers
	}
	// A scenario file's topology stands unless a flag changes it (a file
	// that lists nodes without members gets the default members).
	// Nodes the file generates (scenario nodes, zones) stand unless
	// --nodes or --zones is given.
	fileTopology := s.Topology.Members != 0 || len(s.Topology.Nodes) > 0 || s.Given("topology.members") || s.Nodes > 0
	switch {
	case s.Nodes > 0 && !set("nodes") && !set("zones"):
		if set("members") {
			s.Topology.Members = f.members
			s.SetGiven("topology.members")
		}
	case set("members") || set("nodes") || set("zones") || !fileTopology:
		s.Nodes, s.Zones = 0, 0
		if err := checkNodesZones(f.nodes, f.zones); err != nil {
			return s, err
		}
		// Nodes and zones the user did not give are at least what the
		// workload needs (spread needs two zones), as a scenario's
		// defaults would have them.
		nodes, zones := f.nodes, f.zones
		if w, err := s.TunedWorkload(); err == nil {
			need := w.Needs()
			if !cmd.Flags().Changed("zones") {
				zones = max(zones, need.Zones)
			}
			if !cmd.Flags().Changed("nodes") && need.Kubelets {
				nodes = max(nodes, need.MinNodes, zones)
			}
		}
		if cmd.Flags().Changed("zones") {
			if err := checkZonesFit(nodes, zones); err != nil {
				return s, err
			}
		}
		s.Topology = cluster.DefaultTopology(f.members, nodes, zones)
		s.SetGiven("topology.members") // the flag's, default or not
	}
	if set("keys") {
		s.Keys = f.keys
	}
	if err := addKnobs(&s, f.knobs); err != nil {
		return s, err
	}
	if set("rate") {
		s.Rate = f.rate
	}
	if set("durable") {
		s.Durable = f.durable
	}
	if set("bug") {
		s.Bugs = f.bugs
	}
	if set("fencing") {
		s.Fencing = f.fencing
	}
	if set("fence-agents") {
		s.FenceAgents = f.fenceAgents
	}
	if len(s.FenceAgents) > 0 {
		s.Fencing = true
	}
	if set("bypass-authority") {
		s.BypassAuthority = f.bypassAuthority
	}
	if cmd.Flags().Changed("raft") {
		p, err := cluster.ParseRaftParams(f.raft)
		if err != nil {
			return s, fmt.Errorf("--raft: %w", err)
		}
		s.Raft = s.Raft.With(p)
	}
	if cmd.Flags().Changed("policy") {
		if err := specs.SetPolicies(&s.Policies, f.policies); err != nil {
			return s, err
		}
	}
	if set("target") {
		s.Target = f.target
	}
	if set("kubeconfig") && f.kubeconfig != "" {
		s.Kubeconfig = f.kubeconfig
		if !cmd.Flags().Changed("target") {
			s.Target = specs.TargetKubeconfig
		}
	}
	if s.Target == specs.TargetKube {
		if s.Kube == nil {
			s.Kube = &specs.KubeScenario{}
		}
		if set("kube-version") {
			s.Kube.Version = f.kube.version
		}
		if set("apiservers") {
			s.Kube.APIServers = f.kube.apiServers
		}
		if set("network") {
			s.Kube.Network = f.kube.network
		}
		if set("kubelet-pod-list") {
			s.Kube.Kubelet.PodList = f.kube.podList
		}
	} else if cmd.Flags().Changed("kube-version") || cmd.Flags().Changed("apiservers") || cmd.Flags().Changed("network") || cmd.Flags().Changed("kubelet-pod-list") {
		return s, fmt.Errorf("--kube-version, --apiservers, --network and --kubelet-pod-list are for --target kube")
	}
	return s, nil
}

func runTest(cmd *cobra.Command, f *testFlags) error {
	s, err := scenarioFromFlags(cmd, f)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	s.Defaults()
	if err := s.Validate(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if f.testCount < 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--test-count must be at least 1, got %d", f.testCount)}
	}
	out := cmd.OutOrStdout()
	worst := exitValid
	base := s.Seed
	// A first Ctrl-C stops the run and checks what ran; a second aborts.
	stopRun := claimInterrupts(cmd.Context())
	for i := 0; i < f.testCount; i++ {
		run := s
		if base != 0 {
			run.Seed = base + uint64(i)
		} else {
			run.Seed = 0
		}
		if run.Seed == 0 {
			run.Seed = specs.RandomSeed()
		}
		fmt.Fprintf(out, "podsafe: %s seed %d (%s, nemesis %s, %s, %s)\n", run.Name, run.Seed, run.Workload, nemesisName(run), run.Duration, rateName(run.Rate))
		rerun := func(dir string) string {
			if f.scenarioFile != "" {
				// A scenario from a file may hold what no flag says (node
				// labels, taints): the saved scenario.json, seed included, is
				// the exact reproduction.
				return fmt.Sprintf("podsafe test --scenario %s", filepath.Join(dir, "scenario.json")) + storeFlag(f.store)
			}
			return rerunCommand(run, f.store)
		}
		o, err := specs.Run(cmd.Context(), run, specs.RunOptions{StoreDir: f.store, Progress: cmd.ErrOrStderr(), Rerun: rerun, Stop: stopRun, Compress: f.compress})
		code := printOutcome(out, o, err)
		if code > worst {
			worst = code
		}
		if cmd.Context().Err() != nil || (o != nil && o.Results.Interrupted) {
			break
		}
	}
	if worst != exitValid {
		return &exitError{code: worst}
	}
	return nil
}

func printOutcome(out interface{ Write([]byte) (int, error) }, o *specs.Outcome, err error) int {
	if o == nil {
		fmt.Fprintf(out, "crashed before recording anything: %v\n", err)
		return exitCrashed
	}
	for _, r := range o.Results.Checks {
		fmt.Fprintf(out, "  %-9s %-28s %s\n", r.Verdict, r.Checker, r.Summary)
	}
	fmt.Fprintf(out, "ops: ok %d, fail %d, unknown %d\n", o.Results.Ops.OK, o.Results.Ops.Fail, o.Results.Ops.Unknown)
	if sn := o.Results.Snapshots; sn != nil {
		fmt.Fprintf(out, "raft: %s\n", sn)
	}
	for _, w := range o.Results.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	fmt.Fprintf(out, "verdict: %s\n", o.Results.Label())
	fmt.Fprintf(out, "results: %s (report.html, junit.xml)\n", o.Dir)
	code := verdictCode(o.Results.Verdict)
	if o.Results.Interrupted && err == nil {
		fmt.Fprintf(out, "the run was interrupted; the checkers judged what ran. Check its history again with: podsafe check %s\n", o.Dir)
	}
	if err != nil {
		fmt.Fprintf(out, "the run crashed: %v\nits history is on disk: podsafe check %s\n", err, o.Dir)
		code = exitCrashed
	}
	switch code {
	case exitValid:
		fmt.Fprintln(out, "Everything looks good! ヽ('ー`)ノ")
	case exitInvalid:
		fmt.Fprintln(out, "Analysis invalid! (ﾉಥ益ಥ）ﾉ ┻━┻")
	case exitUnknown:
		fmt.Fprintln(out, "Errors occurred during analysis, but no anomalies found. ಠ~ಠ")
	}
	fmt.Fprintf(out, "rerun: %s\n", o.Results.Rerun)
	return code
}

func verdictCode(v checker.Verdict) int {
	switch v {
	case checker.Ok:
		return exitValid
	case checker.Illegal:
		return exitInvalid
	default:
		return exitUnknown
	}
}

// parseCompose reads the parts of --nemesis-compose: "faults[@interval]".
func parseCompose(values []string) ([]specs.NemesisPart, error) {
	var out []specs.NemesisPart
	for _, v := range values {
		faults, every, timed := strings.Cut(v, "@")
		p := specs.NemesisPart{}
		for _, n := range strings.Split(faults, ",") {
			if n = strings.TrimSpace(n); n != "" {
				p.Faults = append(p.Faults, n)
			}
		}
		if len(p.Faults) == 0 {
			return nil, fmt.Errorf("--nemesis-compose %q names no fault: give faults or groups, comma separated, then optionally @ and an interval (partition@4s)", v)
		}
		if timed {
			d, err := time.ParseDuration(every)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("--nemesis-compose %q: the interval after @ must be a duration > 0 such as 4s, got %q", v, every)
			}
			p.Interval = specs.Duration(d)
		}
		out = append(out, p)
	}
	return out, nil
}

// composeArgs renders a composed nemesis as --nemesis-compose values, each
// part with its interval.
func composeArgs(s specs.Scenario) []string {
	var out []string
	for _, p := range s.NemesisCompose {
		d := p.Interval
		if d == 0 {
			d = s.NemesisInterval
		}
		out = append(out, strings.Join(p.Faults, ",")+"@"+d.String())
	}
	return out
}

func nemesisName(s specs.Scenario) string {
	if len(s.NemesisCompose) > 0 {
		return "composed " + strings.Join(composeArgs(s), " + ")
	}
	if len(s.Nemesis) == 0 {
		return "none"
	}
	return strings.Join(s.Nemesis, ",")
}

func rerunCommand(s specs.Scenario, store string) string {
	args := []string{"podsafe", "test", "--workload", s.Workload}
	if len(s.NemesisCompose) > 0 {
		for _, p := range composeArgs(s) {
			args = append(args, "--nemesis-compose", p)
		}
	} else {
		args = append(args, "--nemesis", nemesisName(s))
	}
	args = append(args,
		"--nemesis-interval", s.NemesisInterval.String(),
		"--time-limit", s.Duration.String(),
		"--seed", fmt.Sprint(s.Seed),
		"--concurrency", fmt.Sprint(s.Concurrency),
		"--members", fmt.Sprint(s.Topology.Members),
		"--nodes", fmt.Sprint(len(s.Topology.Nodes)),
		"--keys", fmt.Sprint(s.Keys),
		// Always: no --rate would mean the default, not what this run had.
		"--rate", strconv.FormatFloat(s.Rate, 'g', -1, 64),
	)
	if z := zones(s.Topology); z > 1 {
		args = append(args, "--zones", fmt.Sprint(z))
	}
	if s.TimeScale != 1 {
		args = append(args, "--time-scale", fmt.Sprint(s.TimeScale))
	}
	if s.Durable {
		args = append(args, "--durable")
	}
	for _, b := range s.Bugs {
		args = append(args, "--bug", b)
	}
	if len(s.Checkers) > 0 {
		args = append(args, "--checkers", strings.Join(s.Checkers, ","))
	}
	if len(s.FenceAgents) > 0 {
		args = append(args, "--fence-agents", strings.Join(s.FenceAgents, ","))
	} else if s.Fencing {
		args = append(args, "--fencing")
	}
	if s.BypassAuthority {
		args = append(args, "--bypass-authority")
	}
	args = append(args, knobArgs(s.Knobs)...)
	if p := s.Policies.Attrs(); p != nil {
		args = append(args, "--policy", joinPairs(p))
	}
	if attrs := s.Raft.Attrs(); attrs != nil {
		// The parameters fixed; the seed draws the others again.
		args = append(args, "--raft", joinPairs(attrs))
	}
	if s.Target == specs.TargetKubeconfig {
		args = append(args, "--kubeconfig", s.Kubeconfig)
	}
	if s.Target == specs.TargetKube && s.Kube != nil {
		args = append(args, "--target", "kube", "--apiservers", fmt.Sprint(s.Kube.APIServers))
		if s.Kube.Version != "" {
			args = append(args, "--kube-version", s.Kube.Version)
		}
		if s.Kube.Network != "" && s.Kube.Network != "auto" {
			args = append(args, "--network", s.Kube.Network)
		}
	}
	return strings.Join(args, " ") + storeFlag(store)
}

// rateName says what a run's operations were limited to.
func rateName(rate float64) string {
	if rate == 0 {
		return "no rate limit"
	}
	return fmt.Sprintf("at most %s ops/s", strconv.FormatFloat(rate, 'g', -1, 64))
}

func storeFlag(store string) string {
	if store == "store" {
		return ""
	}
	return " --store " + store
}

// zones counts the distinct zones of a topology's nodes.
func zones(t cluster.Topology) int {
	seen := map[string]bool{}
	for _, n := range t.Nodes {
		seen[n.Labels[cluster.LabelZone]] = true
	}
	return len(seen)
}

// addKnobs sets the knobs of --knob flags (workload.knob=value) on s, over
// those its file gave.
func addKnobs(s *specs.Scenario, flags []string) error {
	for _, kv := range flags {
		key, value, ok := strings.Cut(kv, "=")
		wl, knob, dotted := strings.Cut(key, ".")
		if !ok || !dotted || wl == "" || knob == "" {
			return fmt.Errorf("--knob %q: write workload.knob=value, such as spread.sets=4", kv)
		}
		var v any
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			return fmt.Errorf("--knob %q: the value is not YAML: %w", kv, err)
		}
		if s.Knobs == nil {
			s.Knobs = workload.Knobs{}
		}
		if s.Knobs[wl] == nil {
			s.Knobs[wl] = map[string]any{}
		}
		s.Knobs[wl][knob] = v
	}
	return nil
}

// knobArgs gives knobs back as --knob flags, sorted, each value as JSON
// (which is YAML) and a string bare where YAML reads it back as itself;
// an argument the shell would split or expand is single-quoted.
func knobArgs(knobs workload.Knobs) []string {
	var args []string
	for wl, values := range knobs {
		for knob, v := range values {
			b, err := json.Marshal(v)
			if err != nil {
				continue // not from YAML, JSON or a flag: Validate refused it
			}
			value := string(b)
			if str, ok := v.(string); ok {
				var back any
				if yaml.Unmarshal([]byte(str), &back) == nil && back == str {
					value = str
				}
			}
			args = append(args, wl+"."+knob+"="+value)
		}
	}
	sort.Strings(args)
	out := make([]string, 0, 2*len(args))
	for _, a := range args {
		out = append(out, "--knob", shellWord(a))
	}
	return out
}

// shellWord quotes w for a POSIX shell where it holds more than letters,
// digits and . _ - = : / , +.
func shellWord(w string) string {
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-=:/,+", r)) {
			return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return w
}

// joinPairs writes m as a flag's name=value list, sorted, comma separated.
func joinPairs(m map[string]string) string {
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
