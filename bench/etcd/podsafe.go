package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/raftstore"
)

// serveArg makes the binary a podsafe server (the child process whose CPU
// is measured) instead of the benchmark.
const serveArg = "serve-podsafe"

// benchToken authenticates the benchmark's clients as the workload.
const benchToken = "storebench-token"

// ready is the child's first line on stdout.
type ready struct {
	API []string `json:"api"`
}

// rawRequest asks the child to run the raw load itself; rawReply answers it.
type rawRequest struct {
	Clients  int           `json:"clients"`
	Duration time.Duration `json:"duration"`
	Warmup   time.Duration `json:"warmup"`
	Size     int           `json:"size"`
	// SizeOf, when set, asks instead for the stored size of this pod.
	SizeOf string `json:"sizeOf,omitempty"`
	// Profile, when set, starts a CPU profile into this file instead;
	// StopProfile stops it.
	Profile     string `json:"profile,omitempty"`
	StopProfile bool   `json:"stopProfile,omitempty"`
}

type rawReply struct {
	Writes    int64         `json:"writes"`
	Errors    int64         `json:"errors"`
	CPU       time.Duration `json:"cpu"`
	FirstErrs []string      `json:"firstErrs,omitempty"`
	Size      int           `json:"size,omitempty"`
	Err       string        `json:"err,omitempty"`
}

// serve runs the child: three durable members and an API server in front of
// each, on loopback; it answers rawRequests on stdin until stdin closes.
func serve(args []string) error {
	fs := flag.NewFlagSet(serveArg, flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory")
	verbose := fs.Bool("v", false, "log to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	stores, err := openStores(*dir, log)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	var urls []string
	for i, s := range stores {
		api, err := apiserver.New(apiserver.Config{
			Store:  s,
			Tokens: map[string]string{benchToken: apiserver.IdentityWorkload},
			Logger: log.With("member", i),
		})
		if err != nil {
			return err
		}
		defer api.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(ready{API: urls}); err != nil {
		return err
	}
	in := json.NewDecoder(bufio.NewReader(os.Stdin))
	for {
		var req rawRequest
		if err := in.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var reply rawReply
		switch {
		case req.Clients > 0:
			reply = rawLoad(stores, req)
		case req.Profile != "":
			if err := startProfile(req.Profile); err != nil {
				reply.Err = err.Error()
			}
		case req.StopProfile:
			pprof.StopCPUProfile()
		case req.SizeOf != "":
			obj, err := stores[0].Get(context.Background(), raftstore.Key{Resource: "pods", Namespace: benchNamespace, Name: req.SizeOf})
			if err != nil {
				reply.Err = err.Error()
			}
			reply.Size = len(obj.Data)
		}
		if err := out.Encode(reply); err != nil {
			return err
		}
	}
}

// startProfile starts a CPU profile into path.
func startProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	return nil
}

// openStores opens three durable members under dir, configured as podsafe's
// cluster configures them, and waits for a leader.
func openStores(dir string, log *slog.Logger) ([]*raftstore.Store, error) {
	const n = 3
	var (
		members []raftstore.Member
		raftLns []net.Listener
		fwdLns  []net.Listener
	)
	for i := range n {
		rl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		fl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		raftLns, fwdLns = append(raftLns, rl), append(fwdLns, fl)
		members = append(members, raftstore.Member{ID: "m" + strconv.Itoa(i), RaftAddr: rl.Addr().String(), ForwardAddr: fl.Addr().String()})
	}
	var d net.Dialer
	var stores []*raftstore.Store
	for i, m := range members {
		s, err := raftstore.Open(raftstore.Config{
			ID: m.ID, Members: members, Bootstrap: true,
			Durable: true, DataDir: filepath.Join(dir, m.ID),
			RaftListener: raftLns[i], ForwardListener: fwdLns[i],
			Dial:    func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
			Logger:  log.With("member", m.ID),
			Indexes: apiserver.StoreIndexes(),
		})
		if err != nil {
			for _, s := range stores {
				s.Close()
			}
			return nil, err
		}
		stores = append(stores, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		leader, agree := stores[0].LeaderID(), true
		for _, s := range stores {
			agree = agree && leader != "" && s.LeaderID() == leader
		}
		if agree {
			return stores, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range stores {
		s.Close()
	}
	return nil, errors.New("no leader within 30s")
}

// rawLoad runs the raw load in the child: Store.Create spread over the
// members (two thirds forwarded to the leader, as through the API servers).
func rawLoad(stores []*raftstore.Store, req rawRequest) rawReply {
	w := newWorkload(req.Size)
	ctx := context.Background()
	op := func(ctx context.Context, prefix string, client, n int) error {
		key := raftstore.Key{Resource: "pods", Namespace: benchNamespace, Name: podName(prefix, client, n)}
		_, err := stores[client%len(stores)].Create(ctx, key, w.value)
		return err
	}
	o := options{clients: req.Clients, duration: req.Duration, warmup: req.Warmup}
	calls := 0
	cpu := func() (time.Duration, error) {
		calls++
		if req.Profile == "" {
			return selfCPU(), nil
		}
		if calls == 2 {
			pprof.StopCPUProfile()
			return selfCPU(), nil
		}
		d := selfCPU()
		return d, startProfile(req.Profile)
	}
	r, err := timedLoad(ctx, o, cpu, op)
	if err != nil {
		return rawReply{Err: err.Error()}
	}
	return rawReply{Writes: r.writes, Errors: r.errors, CPU: r.cpu, FirstErrs: r.firstErrs}
}

// podsafeProc is a running child.
type podsafeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *json.Decoder
	ready ready
}

func startPodsafe(dir string, verbose bool) (*podsafeProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{serveArg, "-dir", dir}
	if verbose {
		args = append(args, "-v")
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &podsafeProc{cmd: cmd, stdin: stdin, out: json.NewDecoder(stdout)}
	if err := p.out.Decode(&p.ready); err != nil {
		p.stop()
		return nil, fmt.Errorf("podsafe server did not start: %w", err)
	}
	return p, nil
}

// call sends a request to the child and reads its reply.
func (p *podsafeProc) call(req rawRequest) (rawReply, error) {
	if err := json.NewEncoder(p.stdin).Encode(req); err != nil {
		return rawReply{}, err
	}
	var reply rawReply
	if err := p.out.Decode(&reply); err != nil {
		return rawReply{}, fmt.Errorf("podsafe server: %w", err)
	}
	if reply.Err != "" {
		return reply, errors.New(reply.Err)
	}
	return reply, nil
}

// profiling wraps a CPU sampler so that the child's CPU profile covers the
// measured window: it starts at the first sample and stops at the second.
func (p *podsafeProc) profiling(path string, cpu func() (time.Duration, error)) func() (time.Duration, error) {
	calls := 0
	return func() (time.Duration, error) {
		calls++
		if calls == 2 {
			if _, err := p.call(rawRequest{StopProfile: true}); err != nil {
				return 0, err
			}
			return cpu()
		}
		d, err := cpu()
		if err == nil {
			_, err = p.call(rawRequest{Profile: path})
		}
		return d, err
	}
}

// stop closes the child's stdin (it closes its stores and exits) and waits.
func (p *podsafeProc) stop() {
	p.stdin.Close()
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
	}
}

// measurePodsafeAPI runs one round through the Kubernetes API: client-go
// clientsets (protobuf bodies, as client-go sends by default), client i on
// API server i mod 3.
func measurePodsafeAPI(ctx context.Context, o options, w *workload, dir string) (result, error) {
	p, err := startPodsafe(dir, o.verbose)
	if err != nil {
		return result{}, err
	}
	defer p.stop()
	var clients []kubernetes.Interface
	for _, url := range p.ready.API {
		cs, err := kubernetes.NewForConfig(&rest.Config{
			Host: url, BearerToken: benchToken, Timeout: 10 * time.Second,
			RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(),
		})
		if err != nil {
			return result{}, err
		}
		clients = append(clients, cs)
	}
	pid := p.cmd.Process.Pid
	cpu := func() (time.Duration, error) { return procCPU(pid) }
	if o.profile != "" {
		cpu = p.profiling(filepath.Join(o.profile, sysPodsafeAPI+".pprof"), cpu)
	}
	r, err := timedLoad(ctx, o, cpu,
		func(ctx context.Context, prefix string, client, n int) error {
			pod := w.apiPod.DeepCopy()
			pod.Name = podName(prefix, client, n)
			_, err := clients[client%len(clients)].CoreV1().Pods(benchNamespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
	if err != nil {
		return result{}, err
	}
	if w.storedSize == 0 {
		if reply, err := p.call(rawRequest{SizeOf: podName("bench", 0, 0)}); err == nil {
			w.storedSize = reply.Size
		}
	}
	return r, nil
}

// measurePodsafeRaw runs one round of Store.Create in the child.
func measurePodsafeRaw(ctx context.Context, o options, w *workload, dir string) (result, error) {
	p, err := startPodsafe(dir, o.verbose)
	if err != nil {
		return result{}, err
	}
	defer p.stop()
	req := rawRequest{Clients: o.clients, Duration: o.duration, Warmup: o.warmup, Size: o.size}
	if o.profile != "" {
		req.Profile = filepath.Join(o.profile, sysPodsafeRaw+".pprof")
	}
	reply, err := p.call(req)
	if err != nil {
		return result{}, err
	}
	return result{writes: reply.Writes, errors: reply.Errors, wall: o.duration, cpu: reply.CPU, firstErrs: reply.FirstErrs}, ctx.Err()
}
