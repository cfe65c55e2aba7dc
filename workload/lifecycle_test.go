package workload

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestLifecycleVariants(t *testing.T) {
	w := &Lifecycle{}
	w.defaults()
	policies := map[corev1.RestartPolicy]bool{}
	initFail := map[corev1.RestartPolicy]bool{} // the policies of failing init containers
	var has struct{ init, startup, liveness, readiness, gate, hang, ignoreTerm, completes bool }
	for _, v := range lifecycleVariants {
		for variant := range uint64(20) {
			pod, value := w.pod([]lifecycleVariant{v}, 2, variant)
			if pod.Name != "lc-2" || pod.Labels["variant"] != v.name {
				t.Fatalf("%s: pod %s labels %v", value, pod.Name, pod.Labels)
			}
			if g := *pod.Spec.TerminationGracePeriodSeconds; g < 1 || g > w.TerminationGrace {
				t.Fatalf("%s: grace %d outside 1..%d", value, g, w.TerminationGrace)
			}
			if pod.Spec.RestartPolicy == "" {
				t.Fatalf("%s: no restart policy", value)
			}
			policies[pod.Spec.RestartPolicy] = true
			if v.name == "init-fail" {
				initFail[pod.Spec.RestartPolicy] = true
			}
			scripts := checkScripts(t, pod.Annotations, pod.Spec)
			for name := range pod.Annotations {
				if _, ok := scripts[name[len("podsafe.io/script."):]]; !ok {
					t.Errorf("%s: annotation %s scripts no container", value, name)
				}
			}
			app := pod.Spec.Containers[0]
			has.init = has.init || len(pod.Spec.InitContainers) > 0
			has.startup = has.startup || app.StartupProbe != nil
			has.liveness = has.liveness || app.LivenessProbe != nil
			has.readiness = has.readiness || app.ReadinessProbe != nil
			has.gate = has.gate || len(pod.Spec.ReadinessGates) > 0
			has.hang = has.hang || scripts["app"].PreStopHang
			has.ignoreTerm = has.ignoreTerm || scripts["app"].IgnoreTerm
			has.completes = has.completes || pod.Spec.RestartPolicy != corev1.RestartPolicyAlways &&
				len(pod.Spec.Containers) == 1 && !scripts["app"].Forever && scripts["app"].Exit == 0
			again, _ := w.pod([]lifecycleVariant{v}, 2, variant)
			if diff := cmp.Diff(pod, again); diff != "" {
				t.Fatalf("the same variant built different pods (-first +second):\n%s", diff)
			}
		}
	}
	if len(policies) != 3 {
		t.Errorf("restart policies used: %v, want all three", policies)
	}
	if len(initFail) != 3 {
		t.Errorf("failing init containers under %v, want all three restart policies", initFail)
	}
	if want := (struct{ init, startup, liveness, readiness, gate, hang, ignoreTerm, completes bool }{
		true, true, true, true, true, true, true, true}); has != want {
		t.Errorf("the catalog lacks a kind of pod: %+v", has)
	}
}

func TestLifecycleCatalog(t *testing.T) {
	w := &Lifecycle{Variants: []string{"probes", "complete"}}
	got, err := w.catalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "probes" || got[1].name != "complete" {
		t.Errorf("catalog %v", got)
	}
	w.Variants = []string{"nope"}
	if err := w.Validate(); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("unknown variant: Validate = %v", err)
	}
	if names := LifecycleVariants(); len(names) != len(lifecycleVariants) || names[0] != "complete" {
		t.Errorf("LifecycleVariants() = %v", names)
	}
	// Every variant is drawn from a full catalog.
	w = &Lifecycle{}
	w.defaults()
	drawn := map[string]bool{}
	for variant := range uint64(500) {
		pod, _ := w.pod(lifecycleVariants, 0, variant)
		drawn[pod.Labels["variant"]] = true
	}
	if len(drawn) != len(lifecycleVariants) {
		t.Errorf("drew %d of %d variants in 500 pods", len(drawn), len(lifecycleVariants))
	}
}
