package apiserver

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/utils/ptr"
)

// The type information apply merges by, built from the served OpenAPI
// definitions, must agree with kube-apiserver's (client-go carries the
// structured-merge-diff schema generated from the same types): the same
// fields, the same list keys (containers by name, ports by port and
// protocol), the same atomic lists and maps (a field set lists an atomic
// list whole, a keyed one by its keys, a set by its values).
func TestTypeConverterMatchesUpstream(t *testing.T) {
	served, err := typeConverter()
	if err != nil {
		t.Fatal(err)
	}
	upstream := applyconfigurations.NewTypeConverter(apiScheme)
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"x": "y"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u1"}},
			Finalizers:      []string{"f"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh", "-c"}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx", Args: []string{"a"},
				Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 80, Protocol: corev1.ProtocolUDP}},
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"stop"}}}},
			}},
			Volumes:     []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
			NodeSelector:     map[string]string{"disk": "ssd"},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s"}},
			ReadinessGates:   []corev1.PodReadinessGate{{ConditionType: "g"}},
		},
	}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: template.ObjectMeta, Spec: template.Spec,
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}}, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}
	objects := []runtime.Object{
		pod,
		&appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, Template: template,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromString("50%"))}}},
			Status: appsv1.StatefulSetStatus{Conditions: []appsv1.StatefulSetCondition{{Type: "x", Status: corev1.ConditionTrue}}}},
		&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, Spec: corev1.ServiceSpec{
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
			Selector: map[string]string{"app": "a"}, ClusterIPs: []string{"10.96.0.1"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}},
		&corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}, PodCIDRs: []string{"10.0.0.0/24"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Capacity:   corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
				Images:     []corev1.ContainerImage{{Names: []string{"nginx"}}}}},
		&policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}}},
	}
	for _, obj := range objects {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		got, err := served.ObjectToTyped(obj)
		if err != nil {
			t.Errorf("%s with the served schemas: %v", kind, err)
			continue
		}
		want, err := upstream.ObjectToTyped(obj)
		if err != nil {
			t.Fatalf("%s with client-go's schema: %v", kind, err)
		}
		gotSet, err := got.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		wantSet, err := want.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		if !gotSet.Equals(wantSet) {
			t.Errorf("%s: the served schemas see fields\n%s\nwhere kube-apiserver's see\n%s", kind, gotSet, wantSet)
		}
	}
}
