package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

var (
	scaleNodes = flag.Int("kubelet.nodes", 200, "BenchmarkKubeletScale: nodes (kubelets)")
	scalePods  = flag.Int("kubelet.pods", 5000, "BenchmarkKubeletScale: running pods")
	scaleTime  = flag.Float64("kubelet.timescale", 10, "BenchmarkKubeletScale: cluster time scale")
	scaleHold  = flag.Duration("kubelet.hold", 60*time.Second, "BenchmarkKubeletScale: scaled time the pods are kept running after the last one started")
	scaleHeap  = flag.String("kubelet.heapprofile", "", "BenchmarkKubeletScale: write a heap profile here once every pod ran through the hold")
	scaleGo    = flag.String("kubelet.goroutineprofile", "", "BenchmarkKubeletScale: write a goroutine profile here (debug=1: counted by stack) once every pod ran through the hold")
)

// BenchmarkKubeletScale measures how many kubelets and running pods one
// process sustains with the simulated runtime, and the pod start latency
// create → Running (as an admin watch sees it) in scaled and wall time. Pods
// are created already bound, so no scheduler runs. Run it once:
//
//	go test -run '^$' -bench KubeletScale -benchtime 1x ./cluster/ -args -kubelet.nodes 200 -kubelet.pods 5000
//
// After every pod is Running it holds them for -kubelet.hold of scaled time
// and checks none left Running: that is what "sustains" means here (leases
// renewed, statuses kept, nothing falling behind).
func BenchmarkKubeletScale(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runKubeletScale(b, *scaleNodes, *scalePods, *scaleTime, *scaleHold)
	}
}

func runKubeletScale(b *testing.B, nodes, pods int, scale float64, hold time.Duration) {
	b.StopTimer()
	c := cluster.StartForTest(b, cluster.Config{Topology: cluster.DefaultTopology(1, nodes, 3), TimeScale: scale, Kubelets: true})
	clk := c.Clock()
	admin, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: cluster.ClientHost(0)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type created struct{ wall, scaled time.Time }
	var (
		mu        sync.Mutex
		createdAt = map[string]created{}
		wallLat   []time.Duration
		scaledLat []time.Duration
		running   = map[string]bool{}
		leftRun   atomic.Int64
		updates   atomic.Int64
	)
	allRunning := make(chan struct{})
	var closeOnce sync.Once
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		wallNow, scaledNow := time.Now(), clk.Now()
		mu.Lock()
		defer mu.Unlock()
		if p.Status.Phase != corev1.PodRunning {
			if running[p.Name] {
				leftRun.Add(1)
			}
			return
		}
		if running[p.Name] {
			return
		}
		at, ok := createdAt[p.Name] // set before the create call
		if !ok {
			return
		}
		running[p.Name] = true
		wallLat = append(wallLat, wallNow.Sub(at.wall))
		scaledLat = append(scaledLat, scaledNow.Sub(at.scaled))
		if len(running) == pods {
			closeOnce.Do(func() { close(allRunning) })
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj any) { updates.Add(1); seen(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop on ctx
		factory.Shutdown()
	}()
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)

	b.StartTimer()
	start := time.Now()
	clients := make([]kubernetes.Interface, 16)
	for i := range clients {
		if clients[i], err = c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: cluster.ClientHost(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, cs := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= pods || ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("s%d", i)
				pod := scriptedPod(name, fmt.Sprintf("node-%d", i%nodes), 5, nil, "app")
				at := created{wall: time.Now(), scaled: clk.Now()}
				mu.Lock()
				createdAt[name] = at
				mu.Unlock()
				if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	createWall := time.Since(start)
	select {
	case <-allRunning:
	case <-time.After(10 * time.Minute):
		mu.Lock()
		n := len(running)
		mu.Unlock()
		b.Fatalf("only %d of %d pods Running after 10 min", n, pods)
	}
	allWall := time.Since(start)
	b.StopTimer()
	updatesBefore, cpuBefore := updates.Load(), cpuTime()
	time.Sleep(clk.WallFor(hold))
	holdCPU := (cpuTime() - cpuBefore).Seconds() / clk.WallFor(hold).Seconds()
	holdUpdates := updates.Load() - updatesBefore
	if n := leftRun.Load(); n > 0 {
		b.Errorf("%d pods left Running while held", n)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	inUse := ms.HeapInuse
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if *scaleHeap != "" {
		if f, err := os.Create(*scaleHeap); err != nil {
			b.Error(err)
		} else {
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Error(err)
			}
			f.Close()
		}
	}

	if *scaleGo != "" {
		if f, err := os.Create(*scaleGo); err != nil {
			b.Error(err)
		} else {
			if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
				b.Error(err)
			}
			f.Close()
		}
	}

	slices.Sort(wallLat)
	slices.Sort(scaledLat)
	pct := func(d []time.Duration, p float64) float64 {
		return d[min(len(d)-1, int(float64(len(d))*p))].Seconds() * 1000
	}
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(pods), "pods")
	b.ReportMetric(pct(wallLat, 0.50), "p50-wall-ms")
	b.ReportMetric(pct(wallLat, 0.99), "p99-wall-ms")
	b.ReportMetric(pct(scaledLat, 0.50), "p50-scaled-ms")
	b.ReportMetric(pct(scaledLat, 0.99), "p99-scaled-ms")
	b.ReportMetric(float64(pods)/createWall.Seconds(), "creates/s")
	b.ReportMetric(allWall.Seconds(), "all-running-s")
	b.ReportMetric(float64(updatesBefore)/float64(pods), "updates/pod")
	b.ReportMetric(float64(holdUpdates), "hold-updates")
	b.ReportMetric(holdCPU, "hold-cores")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	b.ReportMetric(float64(inUse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
	b.ReportMetric(float64(ms.HeapAlloc)/1024/float64(nodes+pods), "live-KiB/(node+pod)")
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MiB")
	}
}

// peakRSS is the process's peak resident set (VmHWM), in bytes; 0 when
// unknown.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
