package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/podsafe/podsafe/target/kube/binaries"
)

// Network modes of Config.Network.
const (
	// NetworkAuto uses namespaces when Check allows them, loopback
	// addresses otherwise.
	NetworkAuto = "auto"
	// NetworkNamespaces puts every process in its own network namespace on
	// a bridge; links are cut with nftables drops. Needs root or
	// CAP_NET_ADMIN.
	NetworkNamespaces = "namespaces"
	// NetworkLoopback gives every process its own 127.x address: no
	// privilege needed, no network faults.
	NetworkLoopback = "loopback"
)

// Config describes one real control plane.
type Config struct {
	// Dir holds every process's data directory and log, the certificates,
	// tokens, kubeconfigs and audit logs. Required.
	Dir string
	// Binaries are the built etcd and Kubernetes binaries. Required.
	Binaries binaries.Paths
	// Etcd is the number of etcd members: 1, 3 or 5 (default 1).
	Etcd int
	// APIServers is the number of kube-apiservers, 1 to 3 (default 1).
	// kube-scheduler and kube-controller-manager run once per API server,
	// each talking to its own API server as kubeadm's control-plane nodes
	// do, with leader election when there are several.
	APIServers int
	// Network is NetworkAuto (default), NetworkNamespaces or
	// NetworkLoopback.
	Network string
	// Timings shortens Kubernetes' timings through the components' flags.
	Timings Timings
	// Logger receives the cluster's own log (nil: discard).
	Logger *slog.Logger
	// DisablePreemption runs kube-scheduler with its DefaultPreemption
	// plugin disabled (a KubeSchedulerConfiguration file), the
	// configuration PR-13 speaks of.
	DisablePreemption bool
	// WatchFronts names the processes ("kube-controller-manager",
	// "kube-scheduler") that reach their API server through a watch front,
	// so that their watches of a resource can be frozen (FreezeWatch).
	WatchFronts []string
	// ExtraArgs are more flags for the processes named by their base name
	// ("etcd", "kube-apiserver", "kube-scheduler",
	// "kube-controller-manager"), after podsafe's own ("--feature-gates=X=false"),
	// as kubeadm's and kind's extraArgs.
	ExtraArgs map[string][]string

	_ struct{}
}

// Timings are the component settings a run shortens, written into
// scenario.json. The defaults make a partitioned node NotReady in about
// 10 s and its pods evicted about 10 s later, at time scale 1.
type Timings struct {
	// NodeMonitorPeriod and NodeMonitorGracePeriod: kube-controller-
	// manager's --node-monitor-period and --node-monitor-grace-period
	// (defaults 2 s and 10 s; upstream 5 s and 50 s).
	NodeMonitorPeriod      Duration `json:"node_monitor_period"`
	NodeMonitorGracePeriod Duration `json:"node_monitor_grace_period"`
	// NotReadyToleration and UnreachableToleration: kube-apiserver's
	// --default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds, in seconds (defaults 10;
	// upstream 300).
	NotReadyToleration    int `json:"not_ready_toleration_seconds"`
	UnreachableToleration int `json:"unreachable_toleration_seconds"`
	// TerminatedPodGCThreshold: kube-controller-manager's
	// --terminated-pod-gc-threshold (default 100; upstream 12500).
	TerminatedPodGCThreshold int `json:"terminated_pod_gc_threshold"`
	// LeaderElectLease, LeaderElectRenew, LeaderElectRetry: the leader
	// election of replicated schedulers and controller-managers (defaults
	// 6 s, 4 s, 1 s; upstream 15 s, 10 s, 2 s).
	LeaderElectLease Duration `json:"leader_elect_lease_duration"`
	LeaderElectRenew Duration `json:"leader_elect_renew_deadline"`
	LeaderElectRetry Duration `json:"leader_elect_retry_period"`
	// KubeletLeaseRenew and KubeletLeaseDuration: how often podsafe's
	// kubelets renew their node lease and the lease's duration (defaults
	// 2 s and 10 s; upstream 10 s and 40 s).
	KubeletLeaseRenew    Duration `json:"kubelet_lease_renew"`
	KubeletLeaseDuration Duration `json:"kubelet_lease_duration"`
	// KubeletStatusEvery: how often the kubelets post node status
	// (default 10 s).
	KubeletStatusEvery Duration `json:"kubelet_status_every"`
}

// Duration is a time.Duration written as "10s" in JSON.
type Duration time.Duration

// MarshalText writes d as Go writes durations.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultTimings are the shortened timings described on Timings.
func DefaultTimings() Timings {
	return Timings{
		NodeMonitorPeriod:        Duration(2 * time.Second),
		NodeMonitorGracePeriod:   Duration(10 * time.Second),
		NotReadyToleration:       10,
		UnreachableToleration:    10,
		TerminatedPodGCThreshold: 100,
		LeaderElectLease:         Duration(6 * time.Second),
		LeaderElectRenew:         Duration(4 * time.Second),
		LeaderElectRetry:         Duration(time.Second),
		KubeletLeaseRenew:        Duration(2 * time.Second),
		KubeletLeaseDuration:     Duration(10 * time.Second),
		KubeletStatusEvery:       Duration(10 * time.Second),
	}
}

// fill sets zero fields to their defaults.
func (t *Timings) fill() {
	d := DefaultTimings()
	def := func(v *Duration, x Duration) {
		if *v == 0 {
			*v = x
		}
	}
	defInt := func(v *int, x int) {
		if *v == 0 {
			*v = x
		}
	}
	def(&t.NodeMonitorPeriod, d.NodeMonitorPeriod)
	def(&t.NodeMonitorGracePeriod, d.NodeMonitorGracePeriod)
	defInt(&t.NotReadyToleration, d.NotReadyToleration)
	defInt(&t.UnreachableToleration, d.UnreachableToleration)
	defInt(&t.TerminatedPodGCThreshold, d.TerminatedPodGCThreshold)
	def(&t.LeaderElectLease, d.LeaderElectLease)
	def(&t.LeaderElectRenew, d.LeaderElectRenew)
	def(&t.LeaderElectRetry, d.LeaderElectRetry)
	def(&t.KubeletLeaseRenew, d.KubeletLeaseRenew)
	def(&t.KubeletLeaseDuration, d.KubeletLeaseDuration)
	def(&t.KubeletStatusEvery, d.KubeletStatusEvery)
}

// ErrInvalidConfig: a Config field is out of range.
var ErrInvalidConfig = errors.New("invalid kube target configuration")

// defaults fills zero fields and validates the rest.
func (c *Config) defaults() error {
	if c.Etcd == 0 {
		c.Etcd = 1
	}
	if c.APIServers == 0 {
		c.APIServers = 1
	}
	if c.Network == "" {
		c.Network = NetworkAuto
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Timings.fill()
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	case c.Binaries.Etcd == "" || c.Binaries.KubeAPIServer == "" || c.Binaries.KubeScheduler == "" || c.Binaries.KubeControllerManager == "":
		return fmt.Errorf("%w: the binaries are not built (run make kube-binaries)", ErrInvalidConfig)
	case c.Etcd != 1 && c.Etcd != 3 && c.Etcd != 5:
		return fmt.Errorf("%w: --etcd %d: etcd members must be 1, 3 or 5", ErrInvalidConfig, c.Etcd)
	case c.APIServers < 1 || c.APIServers > 3:
		return fmt.Errorf("%w: --apiservers %d: kube-apiservers must be 1 to 3", ErrInvalidConfig, c.APIServers)
	case c.Network != NetworkAuto && c.Network != NetworkNamespaces && c.Network != NetworkLoopback:
		return fmt.Errorf("%w: network %q: choose auto, namespaces or loopback", ErrInvalidConfig, c.Network)
	case c.Timings.KubeletLeaseRenew >= c.Timings.KubeletLeaseDuration:
		return fmt.Errorf("%w: the kubelet lease renew period %s must be shorter than its duration %s", ErrInvalidConfig, c.Timings.KubeletLeaseRenew.D(), c.Timings.KubeletLeaseDuration.D())
	case c.Timings.LeaderElectRenew >= c.Timings.LeaderElectLease:
		return fmt.Errorf("%w: the leader-election renew deadline must be shorter than the lease", ErrInvalidConfig)
	}
	for _, f := range c.WatchFronts {
		if f != "kube-controller-manager" && f != "kube-scheduler" {
			return fmt.Errorf("%w: watch front %q: choose kube-controller-manager or kube-scheduler", ErrInvalidConfig, f)
		}
	}
	for comp, args := range c.ExtraArgs {
		if !slices.Contains([]string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"}, comp) {
			return fmt.Errorf("%w: extra args of %q: choose etcd, kube-apiserver, kube-scheduler or kube-controller-manager", ErrInvalidConfig, comp)
		}
		for _, a := range args {
			if !strings.HasPrefix(a, "--") {
				return fmt.Errorf("%w: extra arg %q of %s: write flags as --name=value", ErrInvalidConfig, a, comp)
			}
		}
	}
	return nil
}
