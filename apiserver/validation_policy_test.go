package apiserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestValidatePDB: minAvailable and maxUnavailable are exclusive, each a
// non-negative integer or a percentage up to 100%; the eviction policy is
// one there is.
func TestValidatePDB(t *testing.T) {
	i, s := intstr.FromInt32, intstr.FromString
	for _, tc := range []struct {
		name     string
		min, max *intstr.IntOrString
		policy   *policyv1.UnhealthyPodEvictionPolicyType
		want     []fieldErr
	}{
		{"minAvailable integer", ptr.To(i(2)), nil, nil, nil},
		{"maxUnavailable percentage", nil, ptr.To(s("25%")), nil, nil},
		{"neither", nil, nil, nil, nil},
		{"zero", ptr.To(i(0)), nil, nil, nil},
		{"both", ptr.To(i(1)), ptr.To(i(1)), nil,
			[]fieldErr{{"FieldValueInvalid", "spec", "minAvailable and maxUnavailable cannot be both set"}}},
		{"negative", ptr.To(i(-1)), nil, nil,
			[]fieldErr{{"FieldValueInvalid", "spec.minAvailable", "must be greater than or equal to 0"}}},
		{"over 100%", nil, ptr.To(s("101%")), nil,
			[]fieldErr{{"FieldValueInvalid", "spec.maxUnavailable", "must not be greater than 100%"}}},
		{"not a percentage", ptr.To(s("half")), nil, nil,
			[]fieldErr{{"FieldValueInvalid", "spec.minAvailable", "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"}}},
		{"eviction policy", ptr.To(i(1)), nil, ptr.To(policyv1.UnhealthyPodEvictionPolicyType("Sometimes")),
			[]fieldErr{{"FieldValueNotSupported", "spec.unhealthyPodEvictionPolicy", `supported values: "AlwaysAllow", "IfHealthyBudget"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: tc.min, MaxUnavailable: tc.max, UnhealthyPodEvictionPolicy: tc.policy,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
			if d := cmp.Diff(tc.want, fieldErrs(validatePDB(pdb))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestPDBValidationHTTP: a budget with both counts is kube-apiserver's 422
// on spec, on create and on update; a budget may change its count.
func TestPDBValidationHTTP(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pdbs := e.client(IdentityAdmin).PolicyV1().PodDisruptionBudgets("default")
	both := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "both"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
	_, err := pdbs.Create(ctx, both, metav1.CreateOptions{})
	st := apiStatus(t, err)
	if st.Code != 422 || st.Details.Kind != "PodDisruptionBudget" || st.Details.Name != "both" {
		t.Errorf("create: %d %+v", st.Code, st.Details)
	}
	if d := cmp.Diff([]string{"spec"}, causeFields(st)); d != "" {
		t.Errorf("create causes (-want +got)\n%s", d)
	}
	ok := both.DeepCopy()
	ok.Spec.MaxUnavailable = nil
	got, err := pdbs.Create(ctx, ok, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.MinAvailable = ptr.To(intstr.FromString("50%"))
	if got, err = pdbs.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing minAvailable: %v", err)
	}
	got.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	_, err = pdbs.Update(ctx, got, metav1.UpdateOptions{})
	if d := cmp.Diff([]string{"spec"}, causeFields(apiStatus(t, err))); d != "" {
		t.Errorf("update causes (-want +got)\n%s", d)
	}
}
