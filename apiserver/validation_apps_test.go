package apiserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// validSet is a defaulted, valid StatefulSet named name.
func validSet(name string) *appsv1.StatefulSet {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: simTemplate(name)}}
	applyDefaults(set)
	return set
}

// validRS is a defaulted, valid ReplicaSet named name.
func validRS(name string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: simTemplate(name)}}
	applyDefaults(rs)
	return rs
}

// fieldErr is a field error as a test compares it: type, field, detail.
type fieldErr struct{ Type, Field, Detail string }

func fieldErrs(errs field.ErrorList) []fieldErr {
	var out []fieldErr
	for _, e := range errs {
		out = append(out, fieldErr{string(e.Type), e.Field, e.Detail})
	}
	return out
}

// TestValidateStatefulSet: each rule of ValidateStatefulSetSpec podsafe
// enforces, with upstream's field path and message.
func TestValidateStatefulSet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*appsv1.StatefulSet)
		want   []fieldErr
	}{
		{"valid", func(*appsv1.StatefulSet) {}, nil},
		{"no selector", func(s *appsv1.StatefulSet) { s.Spec.Selector = nil },
			[]fieldErr{{"FieldValueRequired", "spec.selector", ""}}},
		{"empty selector", func(s *appsv1.StatefulSet) { s.Spec.Selector = &metav1.LabelSelector{} },
			[]fieldErr{{"FieldValueInvalid", "spec.selector", "empty selector is invalid for statefulset"}}},
		{"selector does not match the template", func(s *appsv1.StatefulSet) { s.Spec.Selector.MatchLabels["app"] = "other" },
			[]fieldErr{{"FieldValueInvalid", "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"negative replicas", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](-1) },
			[]fieldErr{{"FieldValueInvalid", "spec.replicas", "must be greater than or equal to 0"}}},
		{"negative minReadySeconds", func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = -1 },
			[]fieldErr{{"FieldValueInvalid", "spec.minReadySeconds", "must be greater than or equal to 0"}}},
		{"unknown pod management", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" },
			[]fieldErr{{"FieldValueInvalid", "spec.podManagementPolicy", "must be 'OrderedReady' or 'Parallel'"}}},
		{"unknown update strategy", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = "Blue" },
			[]fieldErr{{"FieldValueInvalid", "spec.updateStrategy", "must be 'RollingUpdate' or 'OnDelete'"}}},
		{"OnDelete with rollingUpdate", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType },
			[]fieldErr{{"FieldValueInvalid", "spec.updateStrategy.rollingUpdate", "only allowed for updateStrategy 'RollingUpdate'"}}},
		{"negative partition", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](-1) },
			[]fieldErr{{"FieldValueInvalid", "spec.updateStrategy.rollingUpdate.partition", "must be greater than or equal to 0"}}},
		{"maxUnavailable 0", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		},
			[]fieldErr{{"FieldValueInvalid", "spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot be 0"}}},
		{"maxUnavailable over 100%", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("150%"))
		}, []fieldErr{{"FieldValueInvalid", "spec.updateStrategy.rollingUpdate.maxUnavailable", "must not be greater than 100%"}}},
		{"unknown claim retention", func(s *appsv1.StatefulSet) { s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = "Keep" },
			[]fieldErr{{"FieldValueNotSupported", "spec.persistentVolumeClaimRetentionPolicy.whenScaled", `supported values: "Retain", "Delete"`}}},
		{"service name not a DNS label", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "Db_1" },
			[]fieldErr{{"FieldValueInvalid", "spec.serviceName", "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}}},
		{"template restart policy Never", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]fieldErr{{"FieldValueNotSupported", "spec.template.spec.restartPolicy", `supported values: "Always"`}}},
		{"template activeDeadlineSeconds", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) },
			[]fieldErr{{"FieldValueForbidden", "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in StatefulSet is not Supported"}}},
		{"template pod spec as a pod's", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "" },
			[]fieldErr{{"FieldValueRequired", "spec.template.spec.containers[0].image", ""}}},
		{"template spread constraints (TS-1)", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, []fieldErr{{"FieldValueInvalid", "spec.template.spec.topologySpreadConstraints[0].maxSkew", "must be greater than zero"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := validSet("db")
			tc.change(set)
			got := fieldErrs(validateStatefulSet(set))
			for i := range got {
				// NotSupported details end in the list; compare its start.
				if tc.want != nil && i < len(tc.want) && strings.HasPrefix(got[i].Detail, tc.want[i].Detail) {
					got[i].Detail = tc.want[i].Detail
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestValidateStatefulSetUpdate: selector, claim templates, service name
// and pod management policy are immutable; replicas, template and update
// strategy may change.
func TestValidateStatefulSetUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*appsv1.StatefulSet)
		want   []fieldErr
	}{
		{"replicas, template and strategy may change", func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptr.To[int32](5)
			s.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
		}, nil},
		{"selector", func(s *appsv1.StatefulSet) {
			s.Spec.Selector.MatchLabels["tier"] = "x"
			s.Spec.Template.Labels["tier"] = "x"
		}, []fieldErr{{"FieldValueInvalid", "spec.selector", "field is immutable"}}},
		{"service name", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" },
			[]fieldErr{{"FieldValueInvalid", "spec.serviceName", "field is immutable"}}},
		{"pod management", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement },
			[]fieldErr{{"FieldValueInvalid", "spec.podManagementPolicy", "field is immutable"}}},
		{"claim templates", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		}, []fieldErr{{"FieldValueInvalid", "spec.volumeClaimTemplates", "field is immutable"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := validSet("db")
			set := old.DeepCopy()
			tc.change(set)
			if d := cmp.Diff(tc.want, fieldErrs(validateStatefulSetUpdate(old, set))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestValidateReplicaSet: ValidateReplicaSetSpec's rules, with upstream's
// paths and messages.
func TestValidateReplicaSet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*appsv1.ReplicaSet)
		want   []fieldErr
	}{
		{"valid", func(*appsv1.ReplicaSet) {}, nil},
		{"negative replicas", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](-3) },
			[]fieldErr{{"FieldValueInvalid", "spec.replicas", "must be greater than or equal to 0"}}},
		{"no selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil },
			[]fieldErr{{"FieldValueRequired", "spec.selector", ""}}},
		{"empty selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} },
			[]fieldErr{{"FieldValueInvalid", "spec.selector", "empty selector is invalid for deployment"}}},
		{"selector does not match", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}
		}, []fieldErr{{"FieldValueInvalid", "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"bad selector operator", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
		}, []fieldErr{{"FieldValueInvalid", "spec.selector.matchExpressions[0].operator", "not a valid selector operator"},
			{"FieldValueInvalid", "spec.selector", "invalid label selector"}}},
		{"template restart policy OnFailure", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]fieldErr{{"FieldValueNotSupported", "spec.template.spec.restartPolicy", `supported values: "Always"`}}},
		{"template activeDeadlineSeconds", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) },
			[]fieldErr{{"FieldValueForbidden", "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicaSet is not Supported"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := validRS("web")
			tc.change(rs)
			got := fieldErrs(validateReplicaSet(rs))
			for i := range got {
				if i < len(tc.want) && strings.HasPrefix(got[i].Detail, tc.want[i].Detail) {
					got[i].Detail = tc.want[i].Detail
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestAppsValidationHTTP: through the server, a StatefulSet or ReplicaSet
// that breaks rules is a 422 Invalid naming the kind and object with one
// cause per broken rule; an update changing an immutable field is refused
// whether by PUT or patch; the scale subresource and a template change
// (kubectl rollout restart's patch) are accepted; a created set reads back
// defaulted.
func TestAppsValidationHTTP(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	cs := e.client(IdentityAdmin)
	sets := cs.AppsV1().StatefulSets("default")

	bad := validSet("bad")
	bad.Spec.Replicas = ptr.To[int32](-1)
	bad.Spec.Selector.MatchLabels["app"] = "other"
	_, err := sets.Create(ctx, bad, metav1.CreateOptions{})
	st := apiStatus(t, err)
	if st.Code != 422 || st.Reason != metav1.StatusReasonInvalid || st.Details.Kind != "StatefulSet" || st.Details.Name != "bad" ||
		st.Details.Group != "apps" {
		t.Errorf("create: %d %s %+v", st.Code, st.Reason, st.Details)
	}
	if d := cmp.Diff([]string{"spec.replicas", "spec.template.metadata.labels"}, causeFields(st)); d != "" {
		t.Errorf("create causes (-want +got)\n%s", d)
	}
	if !strings.Contains(st.Message, `StatefulSet.apps "bad" is invalid`) {
		t.Errorf("message %q", st.Message)
	}

	bare := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{ServiceName: "db",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: simTemplate("db")}}
	got, err := sets.Create(ctx, bare, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || ptr.Deref(got.Spec.Replicas, -1) != 1 ||
		got.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("created set not defaulted: %+v", got.Spec)
	}

	upd := got.DeepCopy()
	upd.Spec.ServiceName = "other"
	upd.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	_, err = sets.Update(ctx, upd, metav1.UpdateOptions{})
	if d := cmp.Diff([]string{"spec.serviceName", "spec.podManagementPolicy"}, causeFields(apiStatus(t, err))); d != "" {
		t.Errorf("update causes (-want +got)\n%s", d)
	}
	_, err = sets.Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"selector":{"matchLabels":{"app":"db","x":"y"}},"template":{"metadata":{"labels":{"x":"y"}}}}}`), metav1.PatchOptions{})
	if d := cmp.Diff([]string{"spec.selector"}, causeFields(apiStatus(t, err))); d != "" {
		t.Errorf("patch causes (-want +got)\n%s", d)
	}
	restart := `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}}}}}`
	if got, err = sets.Patch(ctx, "db", types.StrategicMergePatchType, []byte(restart), metav1.PatchOptions{}); err != nil {
		t.Fatalf("rollout restart patch: %v", err)
	} else if got.Generation != 2 {
		t.Errorf("generation %d after a template change, want 2", got.Generation)
	}
	sc, err := sets.GetScale(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 3
	if _, err := sets.UpdateScale(ctx, "db", sc, metav1.UpdateOptions{}); err != nil {
		t.Errorf("scale: %v", err)
	}

	rss := cs.AppsV1().ReplicaSets("default")
	rs, err := rss.Create(ctx, validRS("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
	rs.Spec.Template.Labels["v"] = "2"
	_, err = rss.Update(ctx, rs, metav1.UpdateOptions{})
	if d := cmp.Diff([]string{"spec.selector"}, causeFields(apiStatus(t, err))); d != "" {
		t.Errorf("replica set selector update causes (-want +got)\n%s", d)
	}
	neg := validRS("neg")
	neg.Spec.Replicas = ptr.To[int32](-2)
	_, err = rss.Create(ctx, neg, metav1.CreateOptions{})
	if d := cmp.Diff([]string{"spec.replicas"}, causeFields(apiStatus(t, err))); d != "" {
		t.Errorf("replica set create causes (-want +got)\n%s", d)
	}
}

// apiStatus returns the Status of an API error, failing when err is none.
func apiStatus(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if err == nil || !errors.As(err, &se) {
		t.Fatalf("got %v, want an API status error", err)
	}
	st := se.Status()
	if st.Details == nil {
		st.Details = &metav1.StatusDetails{}
	}
	return st
}

// causeFields lists the fields of a Status's causes, in order.
func causeFields(st metav1.Status) []string {
	var out []string
	for _, c := range st.Details.Causes {
		out = append(out, c.Field)
	}
	return out
}
