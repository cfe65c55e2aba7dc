package kubelet

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// How the kubelet's pod reflector syncs its pods from the API (Config.PodList).
const (
	// PodListAsVersion: as the real kubelet of Config.Version does.
	PodListAsVersion = ""
	// PodListRV0: a LIST with resourceVersion=0 (served from the API
	// server's watch cache, however stale), then a WATCH from what it
	// returned: the real kubelet's reflector before v1.35.
	PodListRV0 = "list"
	// PodListWatchList: one WATCH with sendInitialEvents=true and no
	// resourceVersion (the API server must be at least as fresh as the
	// store), falling back to PodListRV0's LIST when that fails, as
	// client-go's reflector does: the real kubelet's from v1.35, where the
	// WatchListClient gate is on by default.
	PodListWatchList = "watch-list"
)

// PodListModes are the modes Config.PodList accepts besides PodListAsVersion.
var PodListModes = []string{PodListRV0, PodListWatchList}

// watchListDefault is the first Kubernetes version whose components run
// client-go's WatchListClient gate on by default.
var watchListDefault = version.MustParseSemantic("v1.35.0")

// PodListModeFor is how the real kubelet of Kubernetes version v lists its
// pods: PodListWatchList from v1.35 (WatchListClient beta and on by
// default), PodListRV0 before. A version it cannot parse is taken as
// DefaultVersion.
func PodListModeFor(v string) string {
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		parsed = version.MustParseSemantic(DefaultVersion)
	}
	if parsed.AtLeast(watchListDefault) {
		return PodListWatchList
	}
	return PodListRV0
}

// PodListMode is the mode the kubelet's pod reflector runs: Config.PodList,
// or the one of Config.Version. Watch-list needs client-go's WatchListClient
// gate, which is process-wide: with it off (KUBE_FEATURE_WatchListClient=false)
// the reflector lists.
func (k *Kubelet) PodListMode() string { return EffectivePodList(k.cfg.PodList, k.cfg.Version) }

// EffectivePodList is the mode a kubelet of version asked for mode runs:
// mode, or for PodListAsVersion the mode of that version; watch-list only
// while client-go's WatchListClient gate is on in this process.
func EffectivePodList(mode, version string) string {
	if mode == PodListAsVersion {
		mode = PodListModeFor(version)
	}
	if mode == PodListWatchList && !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		return PodListRV0
	}
	return mode
}

// podListWatch lists and watches the pods bound to one node, and tells the
// reflector whether it may use watch-list (IsWatchListSemanticsUnSupported,
// which client-go's reflector asks).
type podListWatch struct {
	*cache.ListWatch
	noWatchList bool
}

// IsWatchListSemanticsUnSupported implements client-go's opt-out of
// watch-list.
func (lw podListWatch) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }

// newPodListWatch lists and watches the pods with spec.nodeName=node, as
// the real kubelet's apiserver pod source does.
func newPodListWatch(client kubernetes.Interface, node, mode string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	return podListWatch{
		ListWatch: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = sel
				return pods.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = sel
				return pods.Watch(ctx, o)
			},
		},
		noWatchList: mode != PodListWatchList,
	}
}

// ValidPodList reports whether mode is a Config.PodList value.
func ValidPodList(mode string) error {
	switch mode {
	case PodListAsVersion, PodListRV0, PodListWatchList:
		return nil
	}
	return fmt.Errorf("%w: PodList %q: choose %q, %q or empty (as the kubelet of Version)", ErrInvalidConfig, mode, PodListRV0, PodListWatchList)
}
