package apiserver

// Defaulting of Services: upstream's SetDefaults_Service, the REST
// strategy's clusterIP/clusterIPs normalisation and the IP family policy the
// service allocator infers on a single-stack (IPv4) cluster. The cluster IP
// itself is allocated from the store (defaults_serviceip.go).

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// defaultService applies the Service defaults: sessionAffinity None (and
// ClientIP's 10800 s timeout), type ClusterIP, ports TCP with targetPort =
// port, externalTrafficPolicy Cluster where the service is reachable from
// outside, internalTrafficPolicy Cluster, allocateLoadBalancerNodePorts for
// LoadBalancers, clusterIPs mirroring clusterIP, and the IP families.
func defaultService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			t := corev1.DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &t}}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			p := corev1.ServiceInternalTrafficPolicyCluster
			spec.InternalTrafficPolicy = &p
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
	// The REST strategy keeps clusterIP and clusterIPs[0] one value.
	switch {
	case spec.ClusterIP != "" && len(spec.ClusterIPs) == 0:
		spec.ClusterIPs = []string{spec.ClusterIP}
	case spec.ClusterIP == "" && len(spec.ClusterIPs) > 0:
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	defaultIPFamilies(svc)
}

// defaultIPFamilies infers ipFamilyPolicy and ipFamilies as the service
// allocator does on an IPv4-only cluster: SingleStack [IPv4], except that a
// headless service without a selector is RequireDualStack with both
// families (it allocates nothing, so it may). ExternalName services have
// neither.
func defaultIPFamilies(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	headlessNoSelector := spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0
	if spec.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		if headlessNoSelector {
			p = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &p
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	if headlessNoSelector && len(spec.IPFamilies) == 1 && *spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		other := corev1.IPv6Protocol
		if spec.IPFamilies[0] == corev1.IPv6Protocol {
			other = corev1.IPv4Protocol
		}
		spec.IPFamilies = append(spec.IPFamilies, other)
	}
}

// externallyAccessible reports whether a service is reachable from outside
// the cluster: a NodePort or LoadBalancer, or a ClusterIP with external IPs.
func externallyAccessible(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return true
	case corev1.ServiceTypeClusterIP:
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

// keepAllocated carries the cluster IPs of the stored service over to an
// update that left them out, as kube-apiserver's patchAllocatedValues does:
// a PUT of the manifest a user applied (no clusterIP) keeps the service's
// address instead of being refused for changing it.
func keepAllocated(old, svc *corev1.Service) {
	if old.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIP = old.Spec.ClusterIP
		svc.Spec.ClusterIPs = append([]string(nil), old.Spec.ClusterIPs...)
	}
}
