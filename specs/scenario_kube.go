package specs

import (
	"github.com/podsafe/podsafe/target/kube"
)

// KubeScenario is the kube target's part of a scenario.
type KubeScenario struct {
	// Version is the Kubernetes release (default: the one matching
	// podsafe's client-go); its binaries must be built (make
	// kube-binaries); Etcd is the etcd release the build used.
	Version string `json:"version,omitempty"`
	Etcd    string `json:"etcd,omitempty"`
	// APIServers is the number of kube-apiservers (1 to 3, default 1).
	APIServers int `json:"apiservers,omitempty"`
	// Network is "auto" (default), "namespaces" or "loopback".
	Network string `json:"network,omitempty"`
	// Timings are the shortened component timings the run used.
	Timings kube.Timings `json:"timings"`
	// Kubelet is how podsafe's kubelets act on the kube target.
	Kubelet KubeletScenario `json:"kubelet,omitempty"`
	// WatchFronts puts the named processes (kube-controller-manager,
	// kube-scheduler) behind a watch front, so that a freeze-watch step can
	// freeze their watches of one resource.
	WatchFronts []string `json:"watchFronts,omitempty"`
	// ExtraArgs are more flags for etcd, kube-apiserver, kube-scheduler or
	// kube-controller-manager ("--feature-gates=X=false"), as kind's
	// extraArgs.
	ExtraArgs map[string][]string `json:"extraArgs,omitempty"`
}

// KubeletScenario is how podsafe's kubelets act on the kube target.
type KubeletScenario struct {
	// PodList is how each kubelet's pod reflector syncs: kubelet.PodListRV0
	// ("list"), kubelet.PodListWatchList ("watch-list"), or "" as the
	// real kubelet of the target's version does; the run records the mode
	// it used.
	PodList string `json:"podList,omitempty"`
	// APIServers pins a node's kubelet to one kube-apiserver (by index):
	// it talks to that one only while it answers, as a kubelet behind a
	// node-local load balancer that prefers it does. Nodes not named spread
	// over the API servers.
	APIServers map[string]int `json:"apiservers,omitempty"`
}
