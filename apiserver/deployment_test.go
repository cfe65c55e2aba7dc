package apiserver

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// validDeployment is a defaulted, valid Deployment named name.
func validDeployment(name string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: simTemplate(name)}}
	applyDefaults(d)
	return d
}

// TestDefaultDeployment: SetDefaults_Deployment's values, and a Recreate
// strategy left without rollingUpdate.
func TestDefaultDeployment(t *testing.T) {
	in := appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: simTemplate("web")}}
	pct := intstr.FromString("25%")
	want := in.DeepCopy()
	want.Spec.Replicas = ptr.To[int32](1)
	want.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &pct, MaxUnavailable: &pct}}
	want.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	want.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	want.Spec.Template = defaultedTemplate("web")
	got := in.DeepCopy()
	applyDefaults(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	recreate := in.DeepCopy()
	recreate.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	applyDefaults(recreate)
	if recreate.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("Recreate defaulted a rollingUpdate %+v", recreate.Spec.Strategy.RollingUpdate)
	}
	one := intstr.FromInt32(1)
	kept := in.DeepCopy()
	kept.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &one}
	applyDefaults(kept)
	if ru := kept.Spec.Strategy.RollingUpdate; ru.MaxSurge.IntValue() != 1 || ru.MaxUnavailable.String() != "25%" {
		t.Errorf("rollingUpdate %v/%v, want maxSurge 1 kept and maxUnavailable 25%%", ru.MaxSurge, ru.MaxUnavailable)
	}
}

// TestValidateDeployment: ValidateDeploymentSpec's rules with upstream's
// field paths and messages.
func TestValidateDeployment(t *testing.T) {
	zero, pct0, pct150 := intstr.FromInt32(0), intstr.FromString("0%"), intstr.FromString("150%")
	for _, tc := range []struct {
		name   string
		change func(*appsv1.Deployment)
		want   []fieldErr
	}{
		{"valid", func(*appsv1.Deployment) {}, nil},
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			[]fieldErr{{"FieldValueRequired", "spec.selector", ""}}},
		{"empty selector", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			[]fieldErr{{"FieldValueInvalid", "spec.selector", "empty selector is invalid for deployment"}}},
		{"selector does not match the template", func(d *appsv1.Deployment) { d.Spec.Selector.MatchLabels["app"] = "other" },
			[]fieldErr{{"FieldValueInvalid", "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](-1) },
			[]fieldErr{{"FieldValueInvalid", "spec.replicas", "must be greater than or equal to 0"}}},
		{"surge and unavailable both 0", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &pct0}
		}, []fieldErr{{"FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"}}},
		{"maxUnavailable over 100%", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = &pct150 },
			[]fieldErr{{"FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable", "must not be greater than 100%"}}},
		{"maxSurge may exceed 100%", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = &pct150 }, nil},
		{"negative maxSurge", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(-1)) },
			[]fieldErr{{"FieldValueInvalid", "spec.strategy.rollingUpdate.maxSurge", "must be greater than or equal to 0"}}},
		{"malformed percentage", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("half")) },
			[]fieldErr{{"FieldValueInvalid", "spec.strategy.rollingUpdate.maxSurge", "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"}}},
		{"Recreate with rollingUpdate", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType },
			[]fieldErr{{"FieldValueForbidden", "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"}}},
		{"unknown strategy", func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"}
		}, []fieldErr{{"FieldValueNotSupported", "spec.strategy", `supported values: "Recreate", "RollingUpdate"`}}},
		{"progress deadline not above minReadySeconds", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 600
		}, []fieldErr{{"FieldValueInvalid", "spec.progressDeadlineSeconds", "must be greater than minReadySeconds"}}},
		{"negative revisionHistoryLimit", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			[]fieldErr{{"FieldValueInvalid", "spec.revisionHistoryLimit", "must be greater than or equal to 0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment("web")
			tc.change(d)
			if diff := cmp.Diff(tc.want, fieldErrs(validateDeployment(d))); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestDeploymentServed: created, defaulted, refused with kube-apiserver's
// message, the generation bumped by spec changes only, the selector
// immutable, scaled through the scale subresource, printed as a Table.
func TestDeploymentServed(t *testing.T) {
	e := newClockedEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityWorkload).AppsV1().Deployments("default")
	bad := validDeployment("bad")
	bad.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
	bad.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	_, err := c.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `Deployment.apps "bad" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `+"`maxSurge`"+` is 0`) {
		t.Fatalf("create with no surge nor unavailability: %v", err)
	}
	in := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: simTemplate("web")}}
	d, err := c.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 || *d.Spec.Replicas != 1 || d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "25%" {
		t.Errorf("created: generation %d, replicas %d, strategy %+v", d.Generation, *d.Spec.Replicas, d.Spec.Strategy)
	}
	d.Spec.Template.Spec.Containers[0].Image = "sim:2"
	if d, err = c.Update(ctx, d, metav1.UpdateOptions{}); err != nil || d.Generation != 2 {
		t.Fatalf("template change: generation %d, err %v; want 2", d.Generation, err)
	}
	sel := d.DeepCopy()
	sel.Spec.Selector.MatchLabels["tier"] = "x"
	sel.Spec.Template.Labels["tier"] = "x"
	if _, err := c.Update(ctx, sel, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector: Invalid value") || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("selector change: %v, want field is immutable", err)
	}
	sc, err := c.UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{})
	if err != nil || sc.Spec.Replicas != 3 || sc.Status.Selector != "app=web" {
		t.Fatalf("scale: %+v, %v", sc, err)
	}
	if d, _ = c.Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 3 || d.Generation != 3 {
		t.Errorf("after scale: replicas %d generation %d, want 3 and 3", *d.Spec.Replicas, d.Generation)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := e.client(IdentityAdmin).AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(3 * time.Minute)
	tab := e.getTable("/apis/apps/v1/namespaces/default/deployments/web")
	want := []any{"web", "1/3", float64(2), float64(1), "3m", "app", "sim:2", "app=web"}
	if len(tab.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(tab.Rows))
	}
	if diff := cmp.Diff(want, tab.Rows[0].Cells); diff != "" {
		t.Errorf("cells (-want +got):\n%s", diff)
	}
}

// TestAuthorizeDeploymentController: the deployment controller writes
// ReplicaSets and the Deployments' status, never pods (PS-7: the
// ReplicaSet controller stays their only writer), nor another's status.
func TestAuthorizeDeploymentController(t *testing.T) {
	w := func(verb string, gr schema.GroupResource, sub string) Request {
		return Request{Identity: IdentityDeploymentController, Verb: verb, Resource: gr, Subresource: sub, Namespace: "default", Name: "x"}
	}
	allowed := Decision{Allowed: true}
	refusedBy := func(rule string) Decision { return Decision{Rule: rule} }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
	checkAuthorize(t, []authorityCaseTable{
		{"creates a replica set", w(VerbCreate, grReplicaSets, ""), allowed},
		{"scales a replica set", w(VerbUpdate, grReplicaSets, ""), allowed},
		{"scales through the subresource", w(VerbUpdate, grReplicaSets, subScale), allowed},
		{"deletes an old replica set", w(VerbDelete, grReplicaSets, ""), allowed},
		{"writes a deployment's status", w(VerbUpdate, grDeployments, subStatus), allowed},
		{"annotates a deployment's revision", w(VerbUpdate, grDeployments, ""), allowed},
		{"may not create a deployment", w(VerbCreate, grDeployments, ""), refusedBy(RuleReplicaSet)},
		{"may not write a replica set's status", w(VerbUpdate, grReplicaSets, subStatus), refusedBy(RuleReplicaSet)},
		{"may not create a pod", Request{Identity: IdentityDeploymentController, Verb: VerbCreate, Resource: grPods, Namespace: "default", Object: pod}, refusedBy(RulePodLifecycle)},
		{"may not delete a pod", w(VerbDelete, grPods, ""), refusedBy(RulePodLifecycle)},
		{"workload creates a deployment", Request{Identity: IdentityWorkload, Verb: VerbCreate, Resource: grDeployments, Namespace: "default", Name: "x"}, allowed},
		{"workload scales a deployment", Request{Identity: IdentityWorkload, Verb: VerbUpdate, Resource: grDeployments, Subresource: subScale, Namespace: "default", Name: "x"}, allowed},
		{"workload may not write a deployment's status", Request{Identity: IdentityWorkload, Verb: VerbUpdate, Resource: grDeployments, Subresource: subStatus, Namespace: "default", Name: "x"}, refusedBy(RuleReplicaSet)},
	})
}
