package apiserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestDefaultService: SetDefaults_Service, the clusterIP/clusterIPs mirror
// and the IP families of a single-stack IPv4 cluster, per service shape.
func TestDefaultService(t *testing.T) {
	single := ptr.To(corev1.IPFamilyPolicySingleStack)
	cluster := ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	v4 := []corev1.IPFamily{corev1.IPv4Protocol}
	for _, tc := range []struct {
		name     string
		in, want corev1.ServiceSpec
	}{
		{"plain ClusterIP",
			corev1.ServiceSpec{Selector: map[string]string{"app": "a"}, Ports: []corev1.ServicePort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}},
			corev1.ServiceSpec{Selector: map[string]string{"app": "a"}, Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)},
					{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}},
				InternalTrafficPolicy: cluster, IPFamilyPolicy: single, IPFamilies: v4}},
		{"given clusterIP mirrored in clusterIPs",
			corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 53}}},
			corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, Type: corev1.ServiceTypeClusterIP,
				SessionAffinity: corev1.ServiceAffinityNone, Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)}},
				InternalTrafficPolicy: cluster, IPFamilyPolicy: single, IPFamilies: v4}},
		{"headless with selector is single stack",
			corev1.ServiceSpec{ClusterIP: "None", Selector: map[string]string{"app": "db"}},
			corev1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}, Selector: map[string]string{"app": "db"}, Type: corev1.ServiceTypeClusterIP,
				SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: cluster, IPFamilyPolicy: single, IPFamilies: v4}},
		{"headless without selector requires dual stack",
			corev1.ServiceSpec{ClusterIP: "None"},
			corev1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}, Type: corev1.ServiceTypeClusterIP,
				SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: cluster,
				IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack), IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}}},
		{"NodePort is reachable from outside",
			corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityNone,
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, InternalTrafficPolicy: cluster, IPFamilyPolicy: single, IPFamilies: v4}},
		{"LoadBalancer allocates node ports",
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone,
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, InternalTrafficPolicy: cluster,
				AllocateLoadBalancerNodePorts: ptr.To(true), IPFamilyPolicy: single, IPFamilies: v4}},
		{"ExternalName has no IP families or traffic policy",
			corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
			corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: corev1.ServiceAffinityNone}},
		{"ClientIP affinity gets its timeout",
			corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP, Ports: []corev1.ServicePort{{Port: 80}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}},
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				InternalTrafficPolicy: cluster, IPFamilyPolicy: single, IPFamilies: v4}},
		{"None affinity drops a config",
			corev1.ServiceSpec{SessionAffinityConfig: &corev1.SessionAffinityConfig{}, Ports: []corev1.ServicePort{{Port: 80}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				InternalTrafficPolicy: cluster, IPFamilyPolicy: single, IPFamilies: v4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: tc.in}
			applyDefaults(svc)
			if d := cmp.Diff(tc.want, svc.Spec); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
			again := svc.DeepCopy()
			applyDefaults(again)
			if d := cmp.Diff(svc, again); d != "" {
				t.Errorf("defaulting twice (-once +twice)\n%s", d)
			}
		})
	}
}

// TestKeepAllocated: an update without cluster IPs keeps the stored ones
// (patchAllocatedValues); one that names them, or a change to or from
// ExternalName, is left as it is.
func TestKeepAllocated(t *testing.T) {
	old := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}}
	for _, tc := range []struct {
		name    string
		upd     corev1.ServiceSpec
		wantIP  string
		wantIPs []string
	}{
		{"left out", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}, "10.96.0.10", []string{"10.96.0.10"}},
		{"named", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.11", ClusterIPs: []string{"10.96.0.11"}}, "10.96.0.11", []string{"10.96.0.11"}},
		{"to ExternalName", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: tc.upd}
			keepAllocated(old, svc)
			if svc.Spec.ClusterIP != tc.wantIP {
				t.Errorf("clusterIP %q, want %q", svc.Spec.ClusterIP, tc.wantIP)
			}
			if d := cmp.Diff(tc.wantIPs, svc.Spec.ClusterIPs); d != "" {
				t.Errorf("clusterIPs (-want +got)\n%s", d)
			}
		})
	}
}
