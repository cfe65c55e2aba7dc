package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The convergence rule of Deployments: a settled Deployment's rollout is
// complete.

// podTemplateHashLabel is the label a Deployment's controller adds to the
// template of each ReplicaSet it makes (and nothing else of the template).
const podTemplateHashLabel = "pod-template-hash"

// cvTemplate is the part of a pod template the rules compare.
type cvTemplate struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// cvDeployment is an apps/v1 Deployment.
type cvDeployment struct {
	Metadata cvMeta `json:"metadata"`
	Spec     struct {
		Replicas *int64     `json:"replicas"`
		Paused   bool       `json:"paused"`
		Template cvTemplate `json:"template"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Replicas           int64 `json:"replicas"`
		UpdatedReplicas    int64 `json:"updatedReplicas"`
		ReadyReplicas      int64 `json:"readyReplicas"`
	} `json:"status"`
}

func (d *cvDeployment) replicas() int64 {
	if d.Spec.Replicas == nil {
		return 1 // the API's default
	}
	return *d.Spec.Replicas
}

// makes reports whether rs's template is the one d's controller makes of
// d's template: the same labels, but for pod-template-hash, and the same
// annotations. The rest of the template is not compared (its encoding
// after defaulting is not the rules' to follow), so two sets that differ
// only there both look current, and the rule then judges neither.
func (d *cvDeployment) makes(rs *cvSet) bool {
	labels := maps.Clone(rs.Spec.Template.Metadata.Labels)
	delete(labels, podTemplateHashLabel)
	return maps.Equal(labels, d.Spec.Template.Metadata.Labels) &&
		maps.Equal(rs.Spec.Template.Metadata.Annotations, d.Spec.Template.Metadata.Annotations)
}

// deploymentRules judges each Deployment that is not being deleted or
// paused: once settled, the ReplicaSet of its current template holds its
// replicas and every older one it controls none (PS-7: a Deployment acts
// through its ReplicaSets), and its status says so (observedGeneration at
// its generation; replicas, updatedReplicas and readyReplicas at its
// replicas). A rollout waits for the new pods to be Ready before it scales
// the old set down, so a Deployment whose current set lacks an active
// pod, or has one not Ready, is excused: the pod rules and the ReplicaSet
// rule judge those pods.
func (j *judgment) deploymentRules() {
	for i := range j.deployments {
		d := &j.deployments[i]
		if d.Metadata.DeletionTimestamp != nil || d.Spec.Paused {
			continue
		}
		want := d.replicas()
		var current []*cvSet
		var old []*cvSet
		for k := range j.rss {
			rs := &j.rss[k]
			if !controlledBy(&rs.Metadata, "Deployment", d.Metadata.UID) || rs.Metadata.DeletionTimestamp != nil {
				continue
			}
			if d.makes(rs) {
				current = append(current, rs)
			} else {
				old = append(old, rs)
			}
		}
		switch {
		case len(current) > 1:
			continue // the rule cannot tell which is current
		case len(current) == 0:
			j.add("deployment", &d.Metadata, "PS-7", "has no ReplicaSet of its current template (annotations %s): its rollout has not begun", annotationList(d.Spec.Template.Metadata.Annotations))
			continue
		}
		cur := current[0]
		if active, ready := j.activePods(cur); active < cur.replicas() || ready < active {
			continue // the rollout waits for these pods
		}
		var wrong []string
		if n := cur.replicas(); n != want {
			wrong = append(wrong, fmt.Sprintf("its current ReplicaSet %s has %d of its %d replicas", cur.Metadata.Name, n, want))
		}
		for _, rs := range old {
			if n := rs.replicas(); n != 0 {
				wrong = append(wrong, fmt.Sprintf("its old ReplicaSet %s still has %d", rs.Metadata.Name, n))
			}
		}
		if len(wrong) > 0 {
			j.add("deployment", &d.Metadata, "PS-7", "rollout not complete: %s", strings.Join(wrong, "; "))
			continue
		}
		if g := d.Metadata.Generation; g > 0 && d.Status.ObservedGeneration < g {
			wrong = append(wrong, fmt.Sprintf("observedGeneration %d (generation %d)", d.Status.ObservedGeneration, g))
		}
		for _, f := range []struct {
			name string
			got  int64
		}{{"replicas", d.Status.Replicas}, {"updatedReplicas", d.Status.UpdatedReplicas}, {"readyReplicas", d.Status.ReadyReplicas}} {
			if f.got != want {
				wrong = append(wrong, fmt.Sprintf("%s %d", f.name, f.got))
			}
		}
		if len(wrong) > 0 {
			j.add("deployment", &d.Metadata, "PS-7", "its rollout is complete (%d replicas), but its status says %s", want, strings.Join(wrong, ", "))
		}
	}
}

// activePods counts the pods rs controls that are active (not terminating,
// not Succeeded or Failed), and those of them that are Ready.
func (j *judgment) activePods(rs *cvSet) (active, ready int64) {
	for _, p := range j.byController[rs.Metadata.UID] {
		if kind, _ := p.controller(); kind == "ReplicaSet" && !p.terminating() && !p.terminal() {
			active++
			if st, _ := p.condition("Ready"); st == "True" {
				ready++
			}
		}
	}
	return active, ready
}

// controlledBy reports whether m's controller is the kind with uid.
func controlledBy(m *cvMeta, kind, uid string) bool {
	for _, o := range m.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.Kind == kind && o.UID == uid
		}
	}
	return false
}

// annotationList renders annotations as k=v, sorted, for evidence.
func annotationList(a map[string]string) string {
	if len(a) == 0 {
		return "none"
	}
	var kv []string
	for k, v := range a {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}
