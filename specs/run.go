package specs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/internal/atomicfile"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/raftstore"
	"github.com/podsafe/podsafe/report"
	"github.com/podsafe/podsafe/target"
	"github.com/podsafe/podsafe/workload"
)

// RunOptions are the parts of a run that are not the scenario: where results
// go and who watches.
type RunOptions struct {
	// StoreDir is the root of results (default "store"); the run writes into
	// StoreDir/<scenario>/<UTC timestamp>-seed<N>/ and points StoreDir/latest at it.
	StoreDir string
	// Progress receives a live progress line (nil: none).
	Progress io.Writer
	// Rerun returns the command line that reproduces the run written to dir;
	// it is saved in the history and results (nil: none).
	Rerun func(dir string) string
	// SettleTime is how long the cluster runs healed after the workload stops
	// and before it is shut down (default 1 s). A run that was not
	// interrupted then waits, for up to ConvergeWait more, for the cluster
	// to converge (checker.Converge), as Jepsen waits for recovery before
	// its final reads: the convergence checker judges the end state.
	SettleTime time.Duration
	// ConvergeWait bounds the wait for convergence after SettleTime, in
	// wall time (default 90 s, past checker.ConvergenceWallCeiling; 20 s at
	// time scale 1, where the bound the checker needs, minutes of cluster
	// time, is out of reach anyway). The wait ends as soon as the cluster
	// converged, or once it ran healed for its convergence bound
	// (checker.Convergence) of cluster time and the wall floor its faults
	// call for (checker.ConvergenceWallFloor).
	ConvergeWait time.Duration
	// CheckTimeout bounds each checker (default 60 s).
	CheckTimeout time.Duration
	// Compress replaces the history by history.jsonl.gz once the run is
	// checked, when its recorder closed cleanly, it loaded and ctx has not
	// ended (history.Compress); otherwise, and in a process killed midway,
	// it stays plain. Every reader of a history reads either form.
	Compress bool
	// Stop, when closed, stops the run early (a first Ctrl-C): the workload
	// and the faults end, the cluster settles healed, and the checkers judge
	// what ran. The check itself ends only with ctx (a second Ctrl-C).
	Stop <-chan struct{}
}

// Outcome is what a run produced.
type Outcome struct {
	Dir     string
	Results report.Results
}

// Run executes scenario s: it builds the cluster, runs the workload and the
// nemesis for s.Duration, heals, records everything in the history, checks it
// and writes results.json and linearizability.html. The error is non-nil only
// when the run itself broke (the outcome's Dir still holds whatever history was
// written); a violated guarantee is a verdict, not an error.
func Run(ctx context.Context, s Scenario, opts RunOptions) (*Outcome, error) {
	s.Defaults()
	if s.Seed == 0 {
		s.Seed = RandomSeed()
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Target == TargetEmbedded {
		// The raft parameters the scenario leaves open, from their own
		// stream of the seed; scenario.json records them all.
		s.Raft = s.Raft.Draw(mrand.New(mrand.NewPCG(s.Seed, 3)))
	}
	if opts.StoreDir == "" {
		opts.StoreDir = "store"
	}
	if opts.SettleTime == 0 {
		opts.SettleTime = time.Second
	}
	if opts.ConvergeWait == 0 {
		opts.ConvergeWait = 90 * time.Second
		if s.TimeScale <= 1 {
			opts.ConvergeWait = 20 * time.Second
		}
	}
	if opts.CheckTimeout == 0 {
		opts.CheckTimeout = 60 * time.Second
	}
	started := time.Now().UTC()
	dir, err := createRunDir(opts.StoreDir, s.Name, fmt.Sprintf("%s-seed%d", started.Format("20060102T150405.000Z"), s.Seed))
	if err != nil {
		return nil, err
	}
	out := &Outcome{Dir: dir}
	rerun := ""
	if opts.Rerun != nil {
		rerun = opts.Rerun(dir)
	}

	logFile, err := os.Create(filepath.Join(dir, "podsafe.log"))
	if err != nil {
		return out, fmt.Errorf("creating log: %w", err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := writeJSON(filepath.Join(dir, "scenario.json"), s); err != nil {
		return out, err
	}
	target := s.Target
	if target == "" {
		target = TargetEmbedded
	}
	extra := map[string]string{"rerun": rerun, history.ExtraTarget: target,
		history.ExtraTimeScale: strconv.FormatFloat(s.TimeScale, 'g', -1, 64)}
	if len(s.Steps) == 0 {
		// The workload runs: the checkers every run of it feeds must find
		// something to judge (a scripted run runs steps instead).
		extra[history.ExtraWorkload] = s.Workload
	}
	if len(s.Checkers) > 0 {
		extra[history.ExtraCheckers] = strings.Join(s.Checkers, ",")
	}
	if s.Rate > 0 {
		extra[history.ExtraRate] = strconv.FormatFloat(s.Rate, 'g', -1, 64)
	}
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), history.Meta{
		Scenario: s.Name, Seed: s.Seed, Start: started, Extra: extra,
	})
	if err != nil {
		return out, fmt.Errorf("creating history: %w", err)
	}
	res := report.Results{Scenario: s.Name, Target: s.Target, Seed: s.Seed, Dir: dir, Rerun: rerun, Started: started}
	// The state the store lines show, followed as they are recorded, for
	// the wait for convergence at the end.
	final := checker.NewFinalTracker()
	rec.ObserveStore(final.Observe)
	logPolicies(rec, s.Policies)
	loadStart := sampleLoad()
	logLoad(rec, "at the start", loadStart)
	runErr := execute(ctx, s, opts, rec, log, &res, final)
	loadEnd := sampleLoad()
	logLoad(rec, "at the end", loadEnd)
	res.Load = loadBetween(loadStart, loadEnd)
	end := history.End{Interrupted: res.Interrupted}
	if runErr != nil {
		end.Error = runErr.Error()
	}
	closeErr := rec.CloseWith(end)
	if closeErr != nil {
		runErr = errors.Join(runErr, fmt.Errorf("closing history: %w", closeErr))
	}
	if runErr != nil {
		res.Error = runErr.Error()
		log.Error("run broke", "err", runErr)
	}
	// Check whatever was recorded, even after a broken run.
	chk, h, chkErr := CheckDirHistory(ctx, dir, opts.CheckTimeout)
	if chkErr != nil {
		runErr = errors.Join(runErr, chkErr)
	} else {
		res.Checks = chk.Checks
		res.Verdict = chk.Verdict
		res.Truncated = chk.Truncated
		res.Incomplete = chk.Incomplete
		res.Ops = chk.Ops
		res.Snapshots = chk.Snapshots
		if opts.Compress && closeErr == nil && ctx.Err() == nil {
			// The history is whole and checked: from here on it is read,
			// never appended to. The report is rendered from h, in memory.
			// An aborted run (ctx ended: a second Ctrl-C) leaves at once.
			if _, err := history.Compress(rec.Path()); err != nil {
				log.Warn("history left uncompressed", "err", err)
				res.Warnings = append(res.Warnings, "history left uncompressed: "+err.Error())
			}
		}
	}
	res.Finished = time.Now().UTC()
	if err := report.WriteResults(dir, res); err != nil {
		runErr = errors.Join(runErr, err)
	}
	// report.html and junit.xml, for people and for CI.
	if h != nil {
		if err := report.WriteRun(dir, h, &res); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("writing the report: %w", err))
		}
	}
	out.Results = res
	return out, runErr
}

// system is the system under test of one run, as the run drives it: a
// target for the nemesis, the workload's clients and watchers, the clock
// durations are measured on, and how to stop it.
type system struct {
	target   target.Target
	clients  []kubernetes.Interface
	watchers func() ([]workload.Watcher, error)
	// admin is an admin client whose calls are recorded as admin's
	// (scripted steps; nil where none is offered).
	admin    kubernetes.Interface
	adminCfg *rest.Config
	clock    clock.WithTicker
	warnings []string
	stop     func()
}

func execute(ctx context.Context, s Scenario, opts RunOptions, rec *history.Recorder, log *slog.Logger, res *report.Results, final *checker.FinalTracker) error {
	// One stream per consumer, each derived from the seed, so the nemesis and
	// the workload draw independently and reproducibly.
	nemesisRng := mrand.New(mrand.NewPCG(s.Seed, 1))
	workloadSeed := mrand.New(mrand.NewPCG(s.Seed, 2)).Uint64()
	w, err := s.TunedWorkload()
	if err != nil {
		return err
	}
	var sys *system
	switch s.Target {
	case TargetKube, TargetKubeconfig:
		adaptToKube(w, s.Target == TargetKubeconfig)
		sys, err = startKubeSystem(ctx, s, w, rec, log, res.Dir)
	default:
		sys, err = startEmbedded(ctx, s, w, rec, log, res.Dir)
	}
	if err != nil {
		return err
	}
	defer sys.stop()
	res.Warnings = append(res.Warnings, sys.warnings...)

	if len(s.Steps) > 0 {
		// A scripted run: the steps, in order, bounded by the time limit;
		// then the same settling as any run.
		runCtx, stop := runContext(ctx, s, opts, res)
		defer stop()
		err := runSteps(runCtx, s.Steps, sys.target, sys.admin, sys.adminCfg, rec)
		rec.Log(checker.LogStepsHealed, map[string]string{"err": fmt.Sprint(err)})
		// The steps' cuts are not timed here: the longest wait the
		// checker may need.
		settle(ctx, s, opts, rec, res, final, time.Now(), checker.ConvergenceWallCeiling)
		return err
	}

	faults, err := nemesis.Lookup(s.Nemesis...)
	if err != nil {
		return err
	}
	parts, err := s.NemesisParts()
	if err != nil {
		return err
	}
	sched := &nemesis.Schedule{Faults: faults, Parts: parts, Interval: time.Duration(s.NemesisInterval), Recorder: rec, Logger: log.With("component", "nemesis")}
	stats := &workload.Stats{}
	runCtx, stop := runContext(ctx, s, opts, res)
	defer stop()
	var wg sync.WaitGroup
	var nemErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		nemErr = sched.Run(runCtx, sys.target, nemesisRng)
	}()
	progressDone := make(chan struct{})
	go progress(opts.Progress, time.Now(), stats, sched, progressDone)
	if r, ok := w.(*workload.Register); ok {
		r.Keys = s.Keys
	}
	waitWatchers, err := startWatchers(runCtx, w, sys, rec, workloadSeed)
	if err != nil {
		return err
	}
	env := workload.Env{
		Clients: sys.clients, Recorder: rec, Seed: workloadSeed, Stats: stats,
		Clock: sys.clock, TimeScale: s.TimeScale, Concurrency: len(sys.clients),
		Zones: map[string]string{},
		// Operations per wall second, whatever the cluster's time scale:
		// the rate bounds what the run records.
		Limiter: workload.NewLimiter(s.Rate, clock.RealClock{}, workloadSeed),
	}
	for _, n := range s.Topology.Nodes {
		env.Nodes = append(env.Nodes, n.Name)
		env.Zones[n.Name] = n.Labels[cluster.LabelZone]
	}
	wlErr := w.Run(runCtx, env)
	stop()
	wlErr = errors.Join(wlErr, waitWatchers())
	nemesisDone := make(chan struct{})
	go func() { wg.Wait(); close(nemesisDone) }()
	var healed time.Time // zero: some fault may still be active
	select {
	case <-nemesisDone:
		rec.Log(checker.LogWorkloadHealed, nil)
		healed = time.Now()
	case <-time.After(nemesisStopGrace):
		// A fault stuck injecting or healing must not hold the run (and
		// its history) hostage: the run ends, says so, and is checked.
		// nemErr is read only once the schedule stopped (nemesisErr).
		msg := fmt.Sprintf("the nemesis did not stop within %s of the run's end: a fault's injection or heal is stuck, and faults may still be active", nemesisStopGrace)
		log.Warn(msg)
		res.Warnings = append(res.Warnings, msg)
		rec.Log("workload finished; the nemesis did not stop", nil)
	}
	close(progressDone)
	if len(parts) > 0 {
		rec.Log("composed nemesis finished", map[string]string{"injected": fmt.Sprint(sched.Injected()),
			"skipped": fmt.Sprint(sched.Skipped())})
	}
	if f, ok := w.(workload.Finisher); ok && !healed.IsZero() && !res.Interrupted && ctx.Err() == nil {
		// The final phase: its operations are recorded after the heal, and
		// the wait below is for their effects too.
		rec.Log(LogFinalPhase, nil)
		wlErr = errors.Join(wlErr, f.Finish(ctx, env))
	}
	settle(ctx, s, opts, rec, res, final, healed, checker.ConvergenceWallFloor(sched.FaultTime()))
	if nemErr := nemesisErr(nemesisDone, &nemErr); nemErr != nil {
		log.Warn("nemesis", "err", nemErr)
		res.Warnings = append(res.Warnings, "nemesis: "+nemErr.Error())
	}
	if len(faults)+len(parts) > 0 && sched.Injected() == 0 && !res.Interrupted && ctx.Err() == nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("no fault was injected: the time limit %s is too short for the nemesis interval %s, or no fault fits the target", s.Duration, s.NemesisInterval))
	}
	for _, w := range res.Warnings {
		rec.Log("warning", map[string]string{"warning": w})
	}
	return wlErr
}

// LogFinalPhase is the log message with which a run, once every fault
// healed, begins its workload's final phase (workload.Finisher).
const LogFinalPhase = "final phase"

// settle lets the healed cluster run for opts.SettleTime, then, unless the
// run was interrupted or some fault may still be active (healed is zero),
// waits until the state final follows shows no divergence (checker.Converge)
// or the cluster has stood still, healed (no pod, set or attachment changed
// since healed or since), for the convergence bound of cluster time and
// floor of wall time (checker.ConvergenceWallFloor of the faults' time), for
// at most opts.ConvergeWait more, and records how it ended, with the
// recorder time of the last store line it judged ("at").
func settle(ctx context.Context, s Scenario, opts RunOptions, rec *history.Recorder, res *report.Results, final *checker.FinalTracker, healed time.Time, floor time.Duration) {
	sleepCtx(ctx, opts.SettleTime)
	if healed.IsZero() || res.Interrupted || ctx.Err() != nil {
		return
	}
	deadline := time.Now().Add(opts.ConvergeWait)
	scale := max(s.TimeScale, 1)
	// The heal on the recorder's clock, which the store lines carry.
	healedAt := rec.Now() - time.Since(healed)
	for {
		began := time.Now()
		st := final.State()
		conv, err := checker.Converge(st)
		div := conv.Divergences
		// How long the cluster has stood still, healed: since the heal
		// or the last change of a pod, set or attachment, as the checker
		// counts it.
		still := rec.Now() - max(healedAt, time.Duration(st.Changed))
		// A little past the bound and the wall floor, so the recorder's
		// clock, which the checker reads, has passed them too (the
		// schedule's fault time covers the intervals the checker reads).
		need := max(time.Duration(float64(conv.Bound)/scale), floor) + 100*time.Millisecond
		converged := err == nil && len(div) == 0
		if converged || still >= need || !time.Now().Before(deadline) || ctx.Err() != nil {
			attrs := map[string]string{
				"converged": strconv.FormatBool(converged),
				"waited":    (time.Duration(float64(time.Since(healed)) * scale)).Round(time.Millisecond).String(),
				"still":     (time.Duration(float64(still) * scale)).Round(time.Millisecond).String(),
				"bound":     conv.Bound.String(),
				"at":        strconv.FormatInt(st.Through, 10),
			}
			if err != nil {
				attrs["error"] = err.Error()
			}
			if len(div) > 0 {
				attrs["divergences"] = strconv.Itoa(len(div))
				attrs["first"] = div[0].String()
			}
			rec.Log(checker.LogConvergence, attrs)
			return
		}
		// Judging 150,000 pods takes a while: the wait looks again after
		// twice as long as it took, and at least 50 ms.
		sleepCtx(ctx, max(50*time.Millisecond, 2*time.Since(began)))
	}
}

// nemesisStopGrace bounds the wait for the nemesis schedule once the run's
// time is up: it heals every active fault, which takes moments; one that
// takes minutes is stuck.
const nemesisStopGrace = 2 * time.Minute

// nemesisErr returns the schedule's error once it has stopped (done is
// closed), and nil while it is still running.
func nemesisErr(done <-chan struct{}, err *error) error {
	select {
	case <-done:
		return *err
	default:
		return nil
	}
}

// startEmbedded starts podsafe's own control plane for s, with its store
// events recorded and its planted bugs switched on.
func startEmbedded(ctx context.Context, s Scenario, w workload.Workload, rec *history.Recorder, log *slog.Logger, dir string) (_ *system, err error) {
	need := w.Needs()
	cfg := cluster.Config{
		Kubelets:        need.Kubelets,
		Scheduler:       need.Scheduler,
		Controllers:     need.Controllers,
		Fencing:         cluster.FencingOptions{Enabled: need.Fencing || s.Fencing, Agents: s.FenceAgents},
		BypassAuthority: s.BypassAuthority,
		Topology:        s.Topology,
		TimeScale:       s.TimeScale,
		Durable:         s.Durable,
		StaleReads:      s.hasBug("stale-read"),
		Raft:            s.Raft,
		WatchWindow:     s.WatchWindow,
		OnSnapshot:      snapshotRecorder(rec),
		Logger:          log,
		// Whatever the node runtimes run goes into the history, so the
		// checkers judge from the same file.
		Ledger: LedgerRecorder(rec),
		// Every component's API calls are recorded with its identity, so
		// the authority and at-most-one checkers see who deleted and
		// created what.
		WrapTransport: rec.WrapTransport,
	}
	s.Policies.applyEmbedded(&cfg)
	if s.Durable {
		cfg.DataDir = filepath.Join(dir, "data")
	}
	c, err := cluster.New(cfg)
	if err != nil {
		return nil, err
	}
	rec.Log(history.LogRaftParams, s.Raft.Attrs())
	startCtx, cancel := context.WithTimeout(ctx, s.Topology.StartTimeout())
	err = c.Start(startCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("starting cluster: %w", err)
	}
	var undo []func()
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		c.Close()
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	rec.Log("cluster started", map[string]string{"members": fmt.Sprint(c.Members())})
	for _, b := range s.Bugs {
		if fp, ok := BugFailpoints[b]; ok {
			if err := failpoint.Enable(fp, "return(true)"); err != nil {
				return nil, fmt.Errorf("planting bug %s: %w", b, err)
			}
			undo = append(undo, func() { failpoint.Disable(fp) }) //nolint:errcheck // best effort at the end of the run
			rec.Log("planted bug switched on", map[string]string{"bug": b, "failpoint": fp})
		}
	}
	evCtx, stopEvents := context.WithCancel(ctx)
	evWG := recordStoreEvents(evCtx, c, rec, storeSources(s.Workload))
	undo = append(undo, func() { stopEvents(); evWG.Wait() })

	clients := make([]kubernetes.Interface, s.Concurrency)
	for i := range clients {
		rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i), Member: i % c.Members()})
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		if clients[i], err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("building client %d: %w", i, err)
		}
	}
	return &system{
		target:   cluster.AsTarget(c),
		clients:  clients,
		watchers: func() ([]workload.Watcher, error) { return registerWatchers(c, rec, len(clients), watcherRewind(s)) },
		clock:    c.Clock(),
		stop:     stop,
	}, nil
}

// snapshotRecorder records every raft snapshot a member takes, installs
// or restores as a history log line (history.LogSnapshotTaken and the
// others), for the report to count.
func snapshotRecorder(rec *history.Recorder) func(string, raftstore.SnapshotEvent) {
	msgs := map[raftstore.SnapshotKind]string{
		raftstore.SnapshotTaken:     history.LogSnapshotTaken,
		raftstore.SnapshotInstalled: history.LogSnapshotInstalled,
		raftstore.SnapshotRestored:  history.LogSnapshotRestored,
	}
	return func(member string, e raftstore.SnapshotEvent) {
		rec.Log(msgs[e.Kind], map[string]string{
			"member": member, "index": strconv.FormatUint(e.Index, 10), "objects": strconv.Itoa(e.Objects),
		})
	}
}

// LedgerRecorder is a kubelet.Ledger that writes every runtime ledger entry
// to rec as a history ledger line. history does not import the system under
// test, so the conversion lives here. Safe for concurrent use.
func LedgerRecorder(rec *history.Recorder) kubelet.Ledger {
	return kubelet.LedgerFunc(func(e kubelet.LedgerEntry) { rec.Ledger(HistoryLedgerEntry(e)) })
}

// HistoryLedgerEntry converts a runtime ledger entry to a history one, field
// by field; the actions are spelled alike. It is pure.
func HistoryLedgerEntry(e kubelet.LedgerEntry) history.LedgerEntry {
	return history.LedgerEntry{
		Node: e.Node, Namespace: e.Namespace, Pod: e.Pod, UID: e.UID, Container: e.Container,
		Action: history.LedgerAction(e.Action), ExitCode: e.ExitCode, Scaled: e.Scaled, Wall: e.Wall,
		Grace: e.Grace, Volume: e.Volume, Token: e.Token,
		Probe: string(e.Probe), Result: string(e.Result), Reason: string(e.Reason),
	}
}

// runContext is the context the workload, the faults and the steps of a
// run share: it ends at the scenario's time limit, with ctx, or when
// opts.Stop is closed (the run is then marked interrupted).
func runContext(ctx context.Context, s Scenario, opts RunOptions, res *report.Results) (context.Context, context.CancelFunc) {
	runCtx, cancel := context.WithTimeout(ctx, time.Duration(s.Duration))
	if opts.Stop == nil {
		return runCtx, cancel
	}
	var once sync.Once
	stopped := make(chan struct{})
	go func() {
		select {
		case <-opts.Stop:
			res.Interrupted = true
			cancel()
		case <-runCtx.Done():
		}
		close(stopped)
	}()
	return runCtx, func() {
		once.Do(func() { cancel(); <-stopped })
	}
}

func progress(w io.Writer, start time.Time, stats *workload.Stats, sched *nemesis.Schedule, done <-chan struct{}) {
	if w == nil {
		return
	}
	// On a terminal the line redraws in place each second; in a log (CI) a
	// line every 5 s is enough.
	every, eol, bol := 5*time.Second, "\n", ""
	if isTerminal(w) {
		every, eol, bol = time.Second, "", "\r"
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			if eol == "" {
				fmt.Fprintln(w)
			}
			return
		case <-t.C:
			active := sched.Active()
			faults := "none"
			if len(active) > 0 {
				sort.Strings(active)
				faults = strings.Join(active, "; ")
			}
			fmt.Fprintf(w, "%s[%5s] %s | faults: %-50s%s", bol, time.Since(start).Truncate(time.Second), stats, faults, eol)
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// RandomSeed draws a fresh seed for a run that was given none.
func RandomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 12 // short enough to type
}

func sortStrings(s []string) []string { sort.Strings(s); return s }

// splitList splits a comma-separated list; "" is none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
