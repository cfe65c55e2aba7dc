// Command etcd compares podsafe's replicated store with a real etcd cluster
// on the same machine: three members each, the same write workload (creates
// of ~1 KiB objects from 32 concurrent clients), in interleaved rounds, so
// that the machine's noise falls on both alike.
//
// Each round starts every system afresh (durable data in a new directory),
// warms it up, measures for -duration and stops it again. Three systems:
//
//   - etcd: three etcd processes; each write is the transaction
//     kube-apiserver sends for a create (put if the key's create revision is
//     0), from clients spread over the three members.
//   - podsafe-api: a podsafe control plane in a child process (three durable
//     raftstore members, an API server in front of each) and pods created
//     through its Kubernetes API with client-go, as users create them,
//     spread over the three API servers.
//   - podsafe-raw: the same three members without the API server: Store.Create
//     called in the child process itself, spread over the three members. The
//     difference to podsafe-api is what the Kubernetes API layer costs.
//   - kube-api: what podsafe-api stands in for, from the same build of the
//     real binaries: three etcd members and a kube-apiserver in front of
//     each (the kube target's configuration, TLS throughout, on loopback),
//     the same client-go creates; CPU is the six processes'. podsafe-api /
//     kube-api is the fair ratio of the Kubernetes API path; podsafe-raw /
//     etcd that of the store alone. Skipped with a message without a
//     cached build (make kube-binaries).
//
// A system's CPU is the user+system time of its server processes during the
// measured window (/proc/PID/stat; getrusage for podsafe-raw, whose clients
// run inside the measured process and cost only a function call each). The
// clients of etcd and podsafe-api run in this process and are not counted.
//
// The etcd binary is the one podsafe builds for its kube target
// (os.UserCacheDir()/podsafe/kube/k8s-*_etcd-*/bin/etcd), or -etcd, or
// $PODSAFE_ETCD. Without one, the etcd rounds are skipped with a message and
// podsafe's are still measured.
//
// Run from the repository root:
//
//	go -C bench/etcd run . -rounds 5 -duration 10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/podsafe/podsafe/target/kube/binaries"
)

// The systems a round measures.
const (
	sysEtcd       = "etcd"
	sysPodsafeAPI = "podsafe-api"
	sysPodsafeRaw = "podsafe-raw"
	sysKubeAPI    = "kube-api"
)

// allSystems are the systems, in the order a round measures them.
var allSystems = []string{sysEtcd, sysKubeAPI, sysPodsafeAPI, sysPodsafeRaw}

type options struct {
	etcd     string
	rounds   int
	duration time.Duration
	warmup   time.Duration
	clients  int
	size     int
	systems  []string
	dir      string
	profile  string
	verbose  bool
	// kube is the cached build of the Kubernetes binaries (kube-api).
	kube binaries.Paths
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == serveArg {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "podsafe server:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	var systems string
	flag.StringVar(&o.etcd, "etcd", os.Getenv("PODSAFE_ETCD"), "etcd binary (default $PODSAFE_ETCD, else the one podsafe's kube target built into the user cache)")
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved rounds (each system once per round)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per system and round")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each measurement")
	flag.IntVar(&o.clients, "clients", 32, "concurrent clients")
	flag.IntVar(&o.size, "size", 1024, "approximate size of each object in bytes")
	flag.StringVar(&systems, "systems", strings.Join(allSystems, ","), "systems to measure, comma-separated")
	flag.StringVar(&o.dir, "dir", "", "directory for the members' data (default: a new temporary directory, removed at the end)")
	flag.StringVar(&o.profile, "cpuprofile", "", "write CPU profiles of podsafe's measured windows into this directory (the last round's are kept)")
	flag.BoolVar(&o.verbose, "v", false, "pass the servers' logs through")
	flag.Parse()
	o.systems = strings.Split(systems, ",")
	for _, s := range o.systems {
		if !slices.Contains(allSystems, s) {
			fmt.Fprintf(os.Stderr, "-systems: unknown system %q (want some of %s)\n", s, strings.Join(allSystems, ", "))
			os.Exit(2)
		}
	}
	if o.rounds < 1 || o.clients < 1 || o.duration <= 0 || o.warmup < 0 || o.size < 256 {
		fmt.Fprintln(os.Stderr, "-rounds and -clients must be at least 1, -duration positive, -warmup not negative, -size at least 256")
		os.Exit(2)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { cancel(fmt.Errorf("interrupted by %v", <-sigs)) }()
	if err := run(ctx, o, os.Stdout); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if slices.Contains(o.systems, sysEtcd) {
		bin, err := findEtcd(o.etcd)
		if err != nil {
			fmt.Fprintf(out, "skipping etcd: %v\n", err)
			o.systems = slices.DeleteFunc(o.systems, func(s string) bool { return s == sysEtcd })
		} else {
			o.etcd = bin
			fmt.Fprintf(out, "etcd: %s (%s)\n", bin, etcdVersion(bin))
		}
	}
	if slices.Contains(o.systems, sysKubeAPI) {
		paths, err := findKube()
		if err != nil {
			fmt.Fprintf(out, "skipping kube-api: %v\n", err)
			o.systems = slices.DeleteFunc(o.systems, func(s string) bool { return s == sysKubeAPI })
		} else {
			o.kube = paths
			fmt.Fprintf(out, "kube-api: kube-apiserver %s and etcd %s from %s\n", paths.Versions.Kubernetes, paths.Versions.Etcd, paths.Dir)
		}
	}
	if len(o.systems) == 0 {
		return errors.New("nothing to measure")
	}
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "podsafe-storebench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	w := newWorkload(o.size)
	fmt.Fprintf(out, "workload: 3 members each, durable, %d clients, creates of %d-byte objects, %d rounds of %v after %v warm-up\n",
		o.clients, len(w.value), o.rounds, o.duration, o.warmup)
	var results []result
	for round := range o.rounds {
		// Alternate the order, so that neither system always runs first
		// (right after the other's files were written and its memory freed).
		order := slices.Clone(o.systems)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, sys := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			rdir := filepath.Join(dir, fmt.Sprintf("%s-%d", sys, round))
			r, err := measure(ctx, o, w, sys, rdir)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, sys, err)
			}
			r.round = round
			results = append(results, r)
			fmt.Fprintf(out, "round %d %-12s %8.0f writes/s %8.0f per CPU-s  cpu %5.2f cores  errors %d%s\n",
				round+1, sys, r.rate(), r.perCPU(), r.cpu.Seconds()/r.wall.Seconds(), r.errors, r.errNote())
			_ = os.RemoveAll(rdir)
		}
	}
	if w.storedSize > 0 {
		fmt.Fprintf(out, "podsafe's API server stored each pod in %d bytes\n", w.storedSize)
	}
	summarize(out, o.systems, results)
	return nil
}

// measure runs one round of one system.
func measure(ctx context.Context, o options, w *workload, sys, dir string) (result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, err
	}
	var (
		r   result
		err error
	)
	switch sys {
	case sysEtcd:
		r, err = measureEtcd(ctx, o, w, dir)
	case sysPodsafeAPI:
		r, err = measurePodsafeAPI(ctx, o, w, dir)
	case sysKubeAPI:
		r, err = measureKubeAPI(ctx, o, w, dir)
	default:
		r, err = measurePodsafeRaw(ctx, o, w, dir)
	}
	r.system = sys
	return r, err
}
