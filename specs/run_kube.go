package specs

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
	"github.com/podsafe/podsafe/target/kube/record"
	"github.com/podsafe/podsafe/workload"
)

// storeResourceGVRs are the API resources behind StoreEventResources and
// the register workload's leases, for following them through a real API.
var storeResourceGVRs = map[string]schema.GroupVersionResource{
	"pods":                              {Version: "v1", Resource: "pods"},
	"nodes":                             {Version: "v1", Resource: "nodes"},
	"volumeattachments.storage.k8s.io":  {Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"},
	"poddisruptionbudgets.policy":       {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	"priorityclasses.scheduling.k8s.io": {Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"},
	"statefulsets.apps":                 {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"replicasets.apps":                  {Group: "apps", Version: "v1", Resource: "replicasets"},
	"deployments.apps":                  {Group: "apps", Version: "v1", Resource: "deployments"},
	workload.LeaseResource:              {Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
}

// startKubeSystem builds and starts the kube target of s, its kubelets
// (their ledger and API calls going to rec), the store-event followers
// and the audit-log tailer, and the workload's clients. Its stop ends the
// followers and the tailer (draining the audit logs into the history) and
// stops the cluster.
func startKubeSystem(ctx context.Context, s Scenario, w workload.Workload, rec *history.Recorder, log *slog.Logger, dir string) (_ *system, err error) {
	fencingOn := s.Fencing || w.Needs().Fencing
	external := s.Target == TargetKubeconfig
	var names []string
	var specs []kube.NodeSpec
	var kubeletOpts KubeletScenario
	if s.Kube != nil {
		kubeletOpts = s.Kube.Kubelet
	}
	for _, n := range s.Topology.Nodes {
		names = append(names, n.Name)
		spec := kube.NodeSpec{Name: n.Name, Labels: n.Labels, Taints: n.Taints}
		if i, ok := kubeletOpts.APIServers[n.Name]; ok {
			spec.APIServer = ptr.To(i)
		}
		specs = append(specs, spec)
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var c *kube.Cluster
	apiServers := 1
	if external {
		c, err = kube.NewExternal(startCtx, kube.ExternalConfig{Kubeconfig: s.Kubeconfig, Logger: log.With("component", "kubeconfig")})
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				c.Close()
			}
		}()
		if p, ok := w.(workload.Placer); ok {
			p.SetPlacement(c.Placement)
		}
		rec.Log("existing cluster", map[string]string{
			"kubeconfig": s.Kubeconfig, "kubernetes": c.ServerVersion(), "network": c.NetworkMode(),
			"node_identity": c.NodeIdentity(), "timings": fmt.Sprintf("%+v", c.Timings()),
		})
	} else {
		bins, err := binaries.Cached(binaries.Options{Versions: binaries.Versions{Kubernetes: s.Kube.Version, Etcd: s.Kube.Etcd}})
		if err != nil {
			return nil, err
		}
		timings := s.Kube.Timings
		if n := s.Policies.TerminatedPodThreshold; n != 0 {
			timings.TerminatedPodGCThreshold = n
		}
		c, err = kube.New(kube.Config{
			Dir: filepath.Join(dir, "kube"), Binaries: bins, Etcd: s.Topology.Members, APIServers: s.Kube.APIServers,
			Network: s.Kube.Network, Timings: timings, Logger: log.With("component", "kube"),
			WatchFronts: s.Kube.WatchFronts, ExtraArgs: s.Kube.ExtraArgs, DisablePreemption: s.Policies.DisablePreemption,
		})
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				c.Close()
			}
		}()
		c.OnExit = func(component string, exitErr error, restartIn time.Duration) {
			rec.Log("component exited by itself; restarting it", map[string]string{
				"component": component, "exit": fmt.Sprint(exitErr), "restart_in": restartIn.String()})
		}
		if err := c.Start(startCtx, names); err != nil {
			return nil, fmt.Errorf("starting the kube target: %w", err)
		}
		apiServers = s.Kube.APIServers
		rec.Log("kube target started", map[string]string{
			"kubernetes": bins.Versions.Kubernetes, "etcd": bins.Versions.Etcd, "network": c.NetworkMode(),
			"etcd_members": fmt.Sprint(s.Topology.Members), "apiservers": fmt.Sprint(s.Kube.APIServers),
			"timings": fmt.Sprintf("%+v", c.Timings()), "dir": c.Dir(),
			"node_monitor_grace_period": c.Timings().NodeMonitorGracePeriod.D().String(),
			"extra_args":                fmt.Sprint(s.Kube.ExtraArgs),
		})
	}
	var warnings []string
	if why := c.NetworkFaultsUnavailable(); why != "" {
		warnings = append(warnings, "network faults unavailable on the kube target: "+why)
	}

	// The record starts before anything under test writes: follow the
	// store through the API as admin (whose calls are not API-call lines),
	// and tail the audit logs for the real components' calls.
	ids := record.NewIdentityMap()
	ids.AddOwn(kube.AdminUser, apiserver.IdentityAdmin)
	ids.AddOwn(kube.WorkloadUser, apiserver.IdentityWorkload)
	ids.AddOwn(kube.FencingUser, apiserver.IdentityFencingController)
	// podsafe's CSI controller is the external-attacher half of
	// Kubernetes' attach/detach: it marks the attachments the real
	// controller makes attached, and detaches them.
	ids.AddOwn(kube.CSIUser, apiserver.IdentityAttachDetachController)
	for _, n := range names {
		ids.AddOwn(kube.NodeUser(n), apiserver.KubeletIdentity(n))
	}
	recCtx, stopRecording := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stopRec := func() { stopRecording(); wg.Wait() }
	// The nodes' heart-beat Leases too: the node-health checker judges
	// the node controller's marks against them.
	sources := append(storeSources(s.Workload), storeSource{resource: workload.LeaseResource, namespace: "kube-node-lease"})
	for _, src := range sources {
		gvr, ok := storeResourceGVRs[src.resource]
		if !ok {
			stopRec()
			return nil, fmt.Errorf("no API resource known for store resource %s", src.resource)
		}
		rc, err := c.RESTConfig(kube.AdminUser, "", 0)
		if err != nil {
			stopRec()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := record.FollowResource(recCtx, rc, gvr, src.namespace, rec, record.FollowOptions{}); err != nil && recCtx.Err() == nil {
				log.Warn("store events", "resource", src.resource, "err", err)
			}
		}()
	}
	if external {
		// podsafe cannot read an existing cluster's audit log: its own
		// components' calls are recorded by their transports, the
		// cluster's are not.
		warnings = append(warnings, "the existing cluster's own components' API calls are not in the history (podsafe does not read its audit log): the authority checker judges podsafe's own clients only")
	} else {
		tailer := &record.AuditTailer{Rec: rec, Identities: ids, Paths: c.AuditLogs()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := tailer.Run(recCtx); err != nil {
				log.Warn("audit log", "err", err)
			}
		}()
	}

	if !external {
		// The storage first: the kubelets' runtimes write to it.
		opts := kube.StorageOptions{Ledger: LedgerRecorder(rec), WrapTransport: rec.WrapTransport, Identity: apiserver.IdentityAttachDetachController,
			CompareTokens: s.Policies.StorageFencingTokens}
		if err := c.StartStorage(startCtx, opts); err != nil {
			stopRec()
			return nil, fmt.Errorf("starting podsafe's storage on the kube target: %w", err)
		}
	}
	mode := kubelet.EffectivePodList(kubeletOpts.PodList, c.ServerVersion())
	rec.Log("kubelets", map[string]string{"pod_list": mode, "asked": kubeletOpts.PodList, "pinned": fmt.Sprint(kubeletOpts.APIServers)})
	if err := c.StartKubelets(startCtx, specs, kube.KubeletOptions{Ledger: LedgerRecorder(rec), WrapTransport: rec.WrapTransport, PodList: kubeletOpts.PodList}); err != nil {
		stopRec()
		return nil, fmt.Errorf("starting podsafe's kubelets on the %s target: %w", c.Kind(), err)
	}
	if fencingOn {
		// podsafe's fencing controller, an ordinary client of the real
		// API servers, its calls recorded under its podsafe identity.
		opts := kube.FencingOptions{Agents: s.FenceAgents,
			WrapTransport: rec.WrapTransport, Identity: apiserver.IdentityFencingController}
		if err := c.StartFencing(startCtx, opts); err != nil {
			stopRec()
			return nil, fmt.Errorf("starting podsafe's fencing controller on the %s target: %w", c.Kind(), err)
		}
		agents := s.FenceAgents
		if len(agents) == 0 {
			agents = kube.DefaultFenceAgents
		}
		rec.Log("fencing controller started", map[string]string{
			"agents": strings.Join(agents, ","), "threshold": kube.DefaultFenceThreshold.String(), "user": kube.FencingUser})
	}
	clientFor := func(i int) (kubernetes.Interface, error) {
		rc, err := c.RESTConfig(kube.WorkloadUser, "", i)
		if err != nil {
			return nil, err
		}
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		return kubernetes.NewForConfig(rc)
	}
	clients := make([]kubernetes.Interface, s.Concurrency)
	for i := range clients {
		if clients[i], err = clientFor(i); err != nil {
			stopRec()
			return nil, fmt.Errorf("building client %d: %w", i, err)
		}
	}
	// The run's watchers: one per API server, each (the register's)
	// reading what it is delivered through the next API server.
	watchers := func() ([]workload.Watcher, error) {
		out := make([]workload.Watcher, apiServers)
		for m := range out {
			var cs [2]kubernetes.Interface
			for j := range cs {
				if cs[j], err = clientFor(m + j); err != nil {
					return nil, fmt.Errorf("building the clients of watcher %d: %w", m, err)
				}
			}
			out[m] = workload.Watcher{Name: fmt.Sprintf("watch-a%d", m), Client: cs[0], Reader: cs[1], Rewind: runWatcherRewind}
		}
		return out, nil
	}
	arc, err := c.RESTConfig(kube.AdminUser, "", 0)
	if err != nil {
		stopRec()
		return nil, err
	}
	arc.WrapTransport = rec.WrapTransport(apiserver.IdentityAdmin)
	admin, err := kubernetes.NewForConfig(arc)
	if err != nil {
		stopRec()
		return nil, err
	}
	return &system{
		target: c, clients: clients, watchers: watchers, admin: admin, adminCfg: arc, clock: clock.RealClock{}, warnings: warnings,
		stop: func() {
			// The kubelets and the control plane stop first, so the
			// followers and the audit tailer record everything up to the
			// end before they drain. On an existing cluster the record
			// ends before podsafe removes its nodes and namespaces there.
			if external {
				c.StopOwn()
				stopRec()
				if err := c.Close(); err != nil {
					log.Warn("cleaning up the existing cluster", "err", err)
				}
				return
			}
			c.Close()
			stopRec()
		},
	}, nil
}

// kubeInterval is the mean time between two operations of the kube
// target's workloads. Their defaults are in the cluster's scaled time (10 s,
// a fifth of a second of wall time at the embedded cluster's scale 50); at
// the kube target's scale 1 that would be one operation per 10 s.
const kubeInterval = 2 * time.Second

// adaptToKube sets what a workload must do differently on the kube target:
// a pace for real time, and pets whose claims ask podsafe's storage class
// (its CSI driver's volumes, which the real attach/detach controller
// attaches); on an existing cluster, where podsafe installs no storage
// driver, pets without RWO volumes.
func adaptToKube(w workload.Workload, external bool) {
	pace := func(d *time.Duration) {
		if *d == 0 {
			*d = kubeInterval
		}
	}
	switch w := w.(type) {
	case *workload.Mix:
		for _, part := range w.Parts {
			adaptToKube(part, external)
		}
	case *workload.Pets:
		if external {
			w.NoVolumes = true
		} else {
			w.StorageClass = kube.StorageClass
		}
		pace(&w.Interval)
	case *workload.Replicas:
		pace(&w.Interval)
	case *workload.Deployments:
		pace(&w.Interval)
	case *workload.Priority:
		pace(&w.Interval)
	case *workload.Spread:
		pace(&w.Interval)
	case *workload.Lifecycle:
		pace(&w.Interval)
	}
}
