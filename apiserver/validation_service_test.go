package apiserver

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestValidateService: ports, names, protocols, type, affinity, cluster IPs
// and traffic policies, with kube-apiserver's paths and messages.
func TestValidateService(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec corev1.ServiceSpec
		want []fieldErr
	}{
		{"one unnamed port", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}, nil},
		{"headless without ports", corev1.ServiceSpec{ClusterIP: "None"}, nil},
		{"no ports", corev1.ServiceSpec{}, []fieldErr{{"FieldValueRequired", "spec.ports", ""}}},
		{"port 0", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 0, TargetPort: ptrPort(80)}}},
			[]fieldErr{{"FieldValueInvalid", "spec.ports[0].port", "must be between 1 and 65535, inclusive"}}},
		{"port 65536", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 65536}}},
			[]fieldErr{{"FieldValueInvalid", "spec.ports[0].port", "must be between 1 and 65535, inclusive"},
				{"FieldValueInvalid", "spec.ports[0].targetPort", "must be between 1 and 65535, inclusive"}}},
		{"two ports, one unnamed", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Port: 443}}},
			[]fieldErr{{"FieldValueRequired", "spec.ports[1].name", ""}}},
		{"duplicate names", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "http", Port: 443}}},
			[]fieldErr{{"FieldValueDuplicate", "spec.ports[1].name", ""}}},
		{"duplicate port and protocol", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 80}}},
			[]fieldErr{{"FieldValueDuplicate", "spec.ports[1]", ""}}},
		{"same port, other protocol", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 53}, {Name: "b", Port: 53, Protocol: corev1.ProtocolUDP}}}, nil},
		{"unknown protocol", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: "ICMP"}}},
			[]fieldErr{{"FieldValueNotSupported", "spec.ports[0].protocol", `supported values: "SCTP", "TCP", "UDP"`}}},
		{"unknown type", corev1.ServiceSpec{Type: "Magic", Ports: []corev1.ServicePort{{Port: 80}}},
			[]fieldErr{{"FieldValueNotSupported", "spec.type", `supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}}},
		{"nodePort on ClusterIP", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}},
			[]fieldErr{{"FieldValueForbidden", "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"}}},
		{"headless NodePort", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "None", Ports: []corev1.ServicePort{{Port: 80}}},
			[]fieldErr{{"FieldValueInvalid", "spec.clusterIPs[0]", "may not be set to 'None' for NodePort services"}}},
		{"bad cluster IP", corev1.ServiceSpec{ClusterIP: "10.96.0.300", Ports: []corev1.ServicePort{{Port: 80}}},
			[]fieldErr{{"FieldValueInvalid", "spec.clusterIPs[0]", "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}}},
		{"dual stack asked", corev1.ServiceSpec{IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack), Ports: []corev1.ServicePort{{Port: 80}}},
			[]fieldErr{{"FieldValueInvalid", "spec.ipFamilyPolicy", "this cluster is not configured for dual-stack services"}}},
		{"ExternalName without a name", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName},
			[]fieldErr{{"FieldValueRequired", "spec.externalName", ""}}},
		{"ExternalName", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com."}, nil},
		{"external policy on ClusterIP", corev1.ServiceSpec{ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: []corev1.ServicePort{{Port: 80}}},
			[]fieldErr{{"FieldValueInvalid", "spec.externalTrafficPolicy", "may only be set for externally-accessible services"}}},
		{"unknown affinity", corev1.ServiceSpec{SessionAffinity: "Sticky", Ports: []corev1.ServicePort{{Port: 80}}},
			[]fieldErr{{"FieldValueNotSupported", "spec.sessionAffinity", `supported values: "ClientIP", "None"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Spec: tc.spec}
			applyDefaults(svc)
			got := fieldErrs(validateService(svc))
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

// TestValidateServiceUpdate: a cluster IP may not change or be unset once
// set; ExternalName and headless-to-headless updates are free.
func TestValidateServiceUpdate(t *testing.T) {
	svc := func(typ corev1.ServiceType, ips ...string) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, ClusterIPs: ips}}
		if len(ips) > 0 {
			s.Spec.ClusterIP = ips[0]
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		old, upd *corev1.Service
		want     []fieldErr
	}{
		{"same", svc("ClusterIP", "10.96.0.10"), svc("ClusterIP", "10.96.0.10"), nil},
		{"changed", svc("ClusterIP", "10.96.0.10"), svc("ClusterIP", "10.96.0.11"),
			[]fieldErr{{"FieldValueInvalid", "spec.clusterIPs[0]", "may not change once set"}}},
		{"to headless", svc("ClusterIP", "10.96.0.10"), svc("ClusterIP", "None"),
			[]fieldErr{{"FieldValueInvalid", "spec.clusterIPs[0]", "may not change once set"}}},
		{"unset", svc("ClusterIP", "10.96.0.10"), svc("ClusterIP"),
			[]fieldErr{{"FieldValueInvalid", "spec.clusterIPs[0]", "primary clusterIP can not be unset"}}},
		{"to ExternalName", svc("ClusterIP", "10.96.0.10"), svc("ExternalName"), nil},
		{"headless stays", svc("ClusterIP", "None"), svc("ClusterIP", "None"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, fieldErrs(validateServiceUpdate(tc.old, tc.upd))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestServiceHTTP: a created Service reads back defaulted (type, protocol,
// targetPort, policies, families), so kubectl get svc shows TYPE and
// PORT(S); a bad one is a 422 naming the Service with a cause per rule; a
// PUT without clusterIP keeps the stored one and a changed one is refused.
func TestServiceHTTP(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	svcs := e.client(IdentityAdmin).CoreV1().Services("default")
	bad := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 0, TargetPort: ptrPort(1)}, {Port: 80, Protocol: "ICMP"}}}}
	_, err := svcs.Create(ctx, bad, metav1.CreateOptions{})
	st := apiStatus(t, err)
	if st.Code != 422 || st.Details.Kind != "Service" || st.Details.Name != "bad" {
		t.Errorf("create: %d %+v", st.Code, st.Details)
	}
	if d := cmp.Diff([]string{"spec.ports[0].port", "spec.ports[1].name", "spec.ports[1].protocol"}, causeFields(st)); d != "" {
		t.Errorf("create causes (-want +got)\n%s", d)
	}
	got, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Type != corev1.ServiceTypeClusterIP || got.Spec.Ports[0].Protocol != corev1.ProtocolTCP || got.Spec.Ports[0].TargetPort.IntValue() != 80 ||
		got.Spec.SessionAffinity != corev1.ServiceAffinityNone || ptr.Deref(got.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicySingleStack ||
		ptr.Deref(got.Spec.InternalTrafficPolicy, "") != corev1.ServiceInternalTrafficPolicyCluster {
		t.Errorf("created service not defaulted: %+v", got.Spec)
	}
	put := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if got, err = svcs.Update(ctx, put, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("PUT without clusterIP: %v", err)
	} else if got.Spec.ClusterIP != "10.96.0.20" {
		t.Errorf("clusterIP %q after a PUT without it, want 10.96.0.20 kept", got.Spec.ClusterIP)
	}
	_, err = svcs.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"clusterIP":"10.96.0.21","clusterIPs":["10.96.0.21"]}}`), metav1.PatchOptions{})
	if d := cmp.Diff([]string{"spec.clusterIPs[0]"}, causeFields(apiStatus(t, err))); d != "" {
		t.Errorf("clusterIP change causes (-want +got)\n%s", d)
	}
}

// ptrPort is an integer target port.
func ptrPort(n int32) intstr.IntOrString { return intstr.FromInt32(n) }

// TestValidateServiceClientIPTimeout: ClientIP affinity needs a timeout,
// accepts one within a day and refuses one beyond.
func TestValidateServiceClientIPTimeout(t *testing.T) {
	tp := "spec.sessionAffinityConfig.clientIP.timeoutSeconds"
	for _, tc := range []struct {
		name    string
		timeout *int32
		want    []fieldErr
	}{
		{"a day", ptr.To[int32](86400), nil},
		{"missing", nil, []fieldErr{{"FieldValueRequired", tp, ""}}},
		{"over a day", ptr.To[int32](86401), []fieldErr{{"FieldValueInvalid", tp, "must be greater than 0 and less than 86400"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
				Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP, Ports: []corev1.ServicePort{{Port: 80}}}}
			applyDefaults(svc)
			svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = tc.timeout
			if d := cmp.Diff(tc.want, fieldErrs(validateService(svc))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}
