package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/target/kube/binaries"
)

// TestConfigFrontsAndExtraArgs: watch fronts and extra args are checked
// when the cluster is made, naming what is wrong.
func TestConfigFrontsAndExtraArgs(t *testing.T) {
	bins := binaries.Paths{Etcd: "etcd", KubeAPIServer: "kube-apiserver", KubeScheduler: "kube-scheduler", KubeControllerManager: "kube-controller-manager"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"front of etcd", func(c *Config) { c.WatchFronts = []string{"etcd"} }, `watch front "etcd"`},
		{"args of an unknown process", func(c *Config) { c.ExtraArgs = map[string][]string{"kubelet": {"--v=4"}} }, `extra args of "kubelet"`},
		{"an arg that is no flag", func(c *Config) {
			c.ExtraArgs = map[string][]string{"kube-controller-manager": {"feature-gates=X=false"}}
		}, `extra arg "feature-gates=X=false"`},
	} {
		cfg := Config{Dir: t.TempDir(), Binaries: bins}
		tc.edit(&cfg)
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig saying %q", tc.name, err, tc.want)
		}
	}
	cfg := Config{Dir: t.TempDir(), Binaries: bins, WatchFronts: []string{"kube-controller-manager"},
		ExtraArgs: map[string][]string{"kube-controller-manager": {"--feature-gates=NodeControllerLeaseCircuitBreaker=false"}}}
	if _, err := New(cfg); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
	// A flag podsafe sets itself is refused when the process starts.
	c := &Cluster{cfg: Config{ExtraArgs: map[string][]string{"kube-controller-manager": {"--node-monitor-grace-period=50s"}}}, procs: map[string]*proc{}}
	err := c.startProc("kube-controller-manager-0", "kube-controller-manager", []string{"--node-monitor-grace-period=10s"})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "podsafe sets --node-monitor-grace-period itself") {
		t.Errorf("an extra arg podsafe sets: %v", err)
	}
}
