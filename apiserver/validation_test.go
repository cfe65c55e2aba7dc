package apiserver

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// TestValidatePriorityClass: the value range (PR-1), the preemption
// policies there are, and on update kube-apiserver's immutability of value
// and preemptionPolicy.
func TestValidatePriorityClass(t *testing.T) {
	class := func(name string, v int32, p corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v, PreemptionPolicy: ptr.To(p)}
	}
	for _, tc := range []struct {
		name string
		pc   *schedulingv1.PriorityClass
		want []fieldErr
	}{
		{"user maximum", class("high", HighestUserPriority, corev1.PreemptLowerPriority), nil},
		{"above user maximum", class("high", HighestUserPriority+1, corev1.PreemptNever),
			[]fieldErr{{"FieldValueForbidden", "value", "maximum allowed value of a user defined priority is 1000000000"}}},
		{"unknown policy", class("c", 1, "Sometimes"),
			[]fieldErr{{"FieldValueNotSupported", "preemptionPolicy", `supported values: "PreemptLowerPriority", "Never"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, fieldErrs(validatePriorityClass(tc.pc))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
	old := class("c", 5, corev1.PreemptLowerPriority)
	for _, tc := range []struct {
		name string
		upd  *schedulingv1.PriorityClass
		want []fieldErr
	}{
		{"description only", &schedulingv1.PriorityClass{ObjectMeta: old.ObjectMeta, Value: 5, PreemptionPolicy: old.PreemptionPolicy, Description: "d"}, nil},
		{"value", class("c", 6, corev1.PreemptLowerPriority), []fieldErr{{"FieldValueForbidden", "value", "may not be changed in an update."}}},
		{"policy", class("c", 5, corev1.PreemptNever), []fieldErr{{"FieldValueInvalid", "preemptionPolicy", "field is immutable"}}},
	} {
		t.Run("update "+tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, fieldErrs(validatePriorityClassUpdate(old, tc.upd))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestPriorityClassHTTP: a created class reads back with preemptionPolicy
// PreemptLowerPriority (kubectl get pc's PREEMPTIONPOLICY), and a value
// change is kube-apiserver's 422 on value.
func TestPriorityClassHTTP(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pcs := e.client(IdentityAdmin).SchedulingV1().PriorityClasses()
	got, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 100}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := ptr.Deref(got.PreemptionPolicy, ""); p != corev1.PreemptLowerPriority {
		t.Errorf("preemptionPolicy %q, want PreemptLowerPriority", p)
	}
	got.Value = 200
	_, err = pcs.Update(ctx, got, metav1.UpdateOptions{})
	st := apiStatus(t, err)
	if st.Code != 422 || st.Details.Kind != "PriorityClass" || st.Details.Name != "high" {
		t.Errorf("update: %d %+v", st.Code, st.Details)
	}
	if d := cmp.Diff([]string{"value"}, causeFields(st)); d != "" {
		t.Errorf("update causes (-want +got)\n%s", d)
	}
}

// TestValidateSpreadConstraints: each field rule of TS-1 as kube-apiserver
// states it, one error per broken rule, naming the field.
func TestValidateSpreadConstraints(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}
	ok := func() corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}
	}
	policy := corev1.NodeInclusionPolicy("Sometimes")
	for _, c := range []struct {
		name string
		edit func(*corev1.TopologySpreadConstraint)
		want []string // "type field", in order
	}{
		{"valid", func(*corev1.TopologySpreadConstraint) {}, nil},
		{"valid matchLabelKeys", func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"pod-template-hash"} }, nil},
		{"maxSkew 0", func(c *corev1.TopologySpreadConstraint) { c.MaxSkew = 0 }, []string{"FieldValueInvalid spec.topologySpreadConstraints[0].maxSkew"}},
		{"no topologyKey", func(c *corev1.TopologySpreadConstraint) { c.TopologyKey = "" }, []string{"FieldValueRequired spec.topologySpreadConstraints[0].topologyKey"}},
		{"unknown whenUnsatisfiable", func(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = "Maybe" },
			[]string{"FieldValueNotSupported spec.topologySpreadConstraints[0].whenUnsatisfiable"}},
		{"minDomains 0", func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](0) },
			[]string{"FieldValueInvalid spec.topologySpreadConstraints[0].minDomains"}},
		{"minDomains with ScheduleAnyway", func(c *corev1.TopologySpreadConstraint) {
			c.MinDomains, c.WhenUnsatisfiable = ptr.To[int32](2), corev1.ScheduleAnyway
		}, []string{"FieldValueInvalid spec.topologySpreadConstraints[0].minDomains"}},
		{"unknown nodeTaintsPolicy", func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &policy },
			[]string{"FieldValueNotSupported spec.topologySpreadConstraints[0].nodeTaintsPolicy"}},
		{"matchLabelKeys without labelSelector", func(c *corev1.TopologySpreadConstraint) {
			c.LabelSelector, c.MatchLabelKeys = nil, []string{"pod-template-hash"}
		}, []string{"FieldValueForbidden spec.topologySpreadConstraints[0].matchLabelKeys"}},
		{"matchLabelKeys overlapping the selector", func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"ok", "app", "tier"} },
			[]string{"FieldValueInvalid spec.topologySpreadConstraints[0].matchLabelKeys[1]", "FieldValueInvalid spec.topologySpreadConstraints[0].matchLabelKeys[2]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tsc := ok()
			c.edit(&tsc)
			errs := validateSpreadConstraints(&corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{tsc}}, field.NewPath("spec", "topologySpreadConstraints"))
			var got []string
			for _, e := range errs {
				got = append(got, string(e.Type)+" "+e.Field)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("errors %q, want %q", got, c.want)
			}
		})
	}
}
