package specs

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
)

// Policies switch on the control plane's optional behaviours, so that a run
// exercises the guarantees that hold only under them: as data, in a
// scenario's policies or `podsafe test --policy name=value`. Zero fields
// keep the target's defaults. Each is recorded in scenario.json and as a
// log line of the history.
type Policies struct {
	// FailPodsOnLostNode is LC-4's policy: the node lifecycle controller
	// sets the pods of a node that stopped heart-beating to Failed (reason
	// NodeLost) once their toleration runs out, instead of deleting them
	// gracefully. The embedded target only: Kubernetes has no such policy.
	FailPodsOnLostNode bool `json:"failPodsOnLostNode,omitempty"`
	// TerminatedPodThreshold is how many terminated pods pod GC lets
	// exist before it deletes the oldest (LC-14; the kube target's
	// --terminated-pod-gc-threshold).
	TerminatedPodThreshold int `json:"terminatedPodThreshold,omitempty"`
	// DisablePreemption turns the scheduler's preemption off (PR-13).
	DisablePreemption bool `json:"disablePreemption,omitempty"`
	// EvictionHard and EvictionSoft are the kubelets' memory eviction
	// thresholds, as quantities ("512Mi"): above them a node reports
	// MemoryPressure and evicts, at once for hard, with
	// EvictionMaxPodGracePeriod seconds for soft once usage stayed above
	// it for EvictionSoftGracePeriod (GP-7, PR-14). The embedded target
	// only.
	EvictionHard              string   `json:"evictionHard,omitempty"`
	EvictionSoft              string   `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod   Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod int64    `json:"evictionMaxPodGracePeriod,omitempty"`
	// StorageFencingTokens makes podsafe's shared storage compare fencing
	// tokens, as a fenced storage does: it refuses a write whose attachment
	// token is below one it accepted for the volume, so a superseded pet
	// cannot write after its successor (PS-15 held by the storage too).
	// The storage checker then judges every accepted write such a storage
	// must refuse. Both targets (the storage is podsafe's on both).
	StorageFencingTokens bool `json:"storageFencingTokens,omitempty"`
}

// embeddedOnly names the policies the kube target has no way to set.
func (p Policies) embeddedOnly() []string {
	var names []string
	if p.FailPodsOnLostNode {
		names = append(names, "failPodsOnLostNode")
	}
	if p.EvictionHard != "" || p.EvictionSoft != "" || p.EvictionSoftGracePeriod != 0 || p.EvictionMaxPodGracePeriod != 0 {
		names = append(names, "the eviction thresholds")
	}
	return names
}

// validate reports the first unusable policy, for target.
func (p Policies) validate(target string) error {
	if _, _, err := p.evictionBytes(); err != nil {
		return err
	}
	switch {
	case p.TerminatedPodThreshold < 0:
		return fmt.Errorf("policies.terminatedPodThreshold is a count of pods, got %d", p.TerminatedPodThreshold)
	case p.EvictionSoftGracePeriod < 0 || p.EvictionMaxPodGracePeriod < 0:
		return fmt.Errorf("policies.evictionSoftGracePeriod and evictionMaxPodGracePeriod must not be negative")
	case p.EvictionSoft == "" && (p.EvictionSoftGracePeriod != 0 || p.EvictionMaxPodGracePeriod != 0):
		return fmt.Errorf("policies.evictionSoftGracePeriod and evictionMaxPodGracePeriod tune the soft eviction threshold, and evictionSoft is not given")
	}
	if only := p.embeddedOnly(); len(only) > 0 && target != TargetEmbedded {
		return fmt.Errorf("policies: %s are the embedded target's; the %s target cannot set them", strings.Join(only, " and "), target)
	}
	return nil
}

// evictionBytes reads the eviction thresholds.
func (p Policies) evictionBytes() (hard, soft int64, err error) {
	read := func(name, q string) (int64, error) {
		if q == "" {
			return 0, nil
		}
		v, err := resource.ParseQuantity(q)
		if err != nil || v.Sign() <= 0 {
			return 0, fmt.Errorf("policies.%s must be a positive quantity of memory such as 512Mi, got %q", name, q)
		}
		return v.Value(), nil
	}
	if hard, err = read("evictionHard", p.EvictionHard); err != nil {
		return 0, 0, err
	}
	soft, err = read("evictionSoft", p.EvictionSoft)
	return hard, soft, err
}

// applyEmbedded sets the policies in an embedded cluster's configuration.
func (p Policies) applyEmbedded(cfg *cluster.Config) {
	cfg.Controller.FailPodsOnLostNode = p.FailPodsOnLostNode
	cfg.Controller.TerminatedPodThreshold = p.TerminatedPodThreshold
	cfg.DisablePreemption = p.DisablePreemption
	hard, soft, _ := p.evictionBytes() // validated
	cfg.Kubelet.EvictionHard, cfg.Kubelet.EvictionSoft = hard, soft
	cfg.Kubelet.EvictionSoftGracePeriod = time.Duration(p.EvictionSoftGracePeriod)
	cfg.Kubelet.EvictionMaxPodGracePeriod = p.EvictionMaxPodGracePeriod
	cfg.StorageFencingTokens = p.StorageFencingTokens
}

// Attrs are the policies set, for the history's log line; nil when none is.
func (p Policies) Attrs() map[string]string {
	if p == (Policies{}) {
		return nil
	}
	a := map[string]string{}
	set := func(name, v string, on bool) {
		if on {
			a[name] = v
		}
	}
	set("failPodsOnLostNode", "true", p.FailPodsOnLostNode)
	set("terminatedPodThreshold", strconv.Itoa(p.TerminatedPodThreshold), p.TerminatedPodThreshold != 0)
	set("disablePreemption", "true", p.DisablePreemption)
	set("evictionHard", p.EvictionHard, p.EvictionHard != "")
	set("evictionSoft", p.EvictionSoft, p.EvictionSoft != "")
	set("evictionSoftGracePeriod", p.EvictionSoftGracePeriod.String(), p.EvictionSoftGracePeriod != 0)
	set("evictionMaxPodGracePeriod", strconv.FormatInt(p.EvictionMaxPodGracePeriod, 10), p.EvictionMaxPodGracePeriod != 0)
	set(checker.LogStorageFencingTokens, "true", p.StorageFencingTokens)
	return a
}

// SetPolicies sets the policies of `podsafe test --policy name=value`
// over those p holds, each value read as YAML, strictly: an unknown name or
// a value of the wrong type is an error naming it.
func SetPolicies(p *Policies, values map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		var v any
		if err := yaml.Unmarshal([]byte(values[name]), &v); err != nil {
			return fmt.Errorf("--policy %s=%s: the value is not YAML: %w", name, values[name], err)
		}
		b, err := json.Marshal(map[string]any{name: v})
		if err != nil {
			return fmt.Errorf("--policy %s: %w", name, err)
		}
		if err := yaml.UnmarshalStrict(b, p); err != nil {
			return fmt.Errorf("--policy %s=%s: %w", name, values[name], err)
		}
	}
	return nil
}

// logPolicies records the run's policies in the history.
func logPolicies(rec *history.Recorder, p Policies) {
	if a := p.Attrs(); a != nil {
		rec.Log("cluster policies", a)
	}
}
