package apiserver

// Validation of Services, as kube-apiserver's ValidateServiceCreate and
// ValidateServiceUpdate for a single-stack IPv4 cluster: ports in range,
// named when there are several and uniquely, with a known protocol; a known
// type, session affinity and traffic policies; cluster IPs well formed and
// never changed once set.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The values kube-apiserver accepts, sorted as its messages list them.
var (
	serviceTypes = []string{string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeExternalName),
		string(corev1.ServiceTypeLoadBalancer), string(corev1.ServiceTypeNodePort)}
	serviceProtocols      = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}
	serviceAffinities     = []string{string(corev1.ServiceAffinityClientIP), string(corev1.ServiceAffinityNone)}
	trafficPolicies       = []string{"Cluster", "Local"}
	serviceFamilyPolicies = []string{string(corev1.IPFamilyPolicyPreferDualStack), string(corev1.IPFamilyPolicyRequireDualStack),
		string(corev1.IPFamilyPolicySingleStack)}
)

// maxClientIPAffinitySeconds is the longest ClientIP affinity timeout (a
// day), upstream's core.MaxClientIPServiceAffinitySeconds.
const maxClientIPAffinitySeconds = int32(86400)

// headless reports whether svc has no cluster IP by choice.
func headless(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone }

// validateService checks a (defaulted) Service.
func validateService(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec, path := &svc.Spec, field.NewPath("spec")
	if len(spec.Ports) == 0 && !headless(svc) && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(path.Child("ports"), ""))
	}
	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless(svc) {
			errs = append(errs, field.Invalid(path.Child("clusterIPs").Index(0), spec.ClusterIP,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if len(spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(path.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(path.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(path.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		if cname := strings.TrimSuffix(spec.ExternalName, "."); cname == "" {
			errs = append(errs, field.Required(path.Child("externalName"), ""))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(cname) {
				errs = append(errs, field.Invalid(path.Child("externalName"), cname, msg))
			}
		}
	}
	names := map[string]bool{}
	type portKey struct {
		proto corev1.Protocol
		port  int32
	}
	seen, nodePorts := map[portKey]bool{}, map[portKey]bool{}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		pp := path.Child("ports").Index(i)
		errs = append(errs, validateServicePort(p, len(spec.Ports) > 1, names, pp)...)
		if spec.Type == corev1.ServiceTypeClusterIP && p.NodePort != 0 {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		}
		if p.NodePort != 0 {
			k := portKey{p.Protocol, p.NodePort}
			if nodePorts[k] {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), p.NodePort))
			}
			nodePorts[k] = true
		}
		k := portKey{p.Protocol, p.Port}
		if seen[k] {
			errs = append(errs, field.Duplicate(pp, corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}))
		}
		seen[k] = true
	}
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(spec.Selector, path.Child("selector"))...)
	}
	switch {
	case spec.SessionAffinity == "":
		errs = append(errs, field.Required(path.Child("sessionAffinity"), ""))
	case !slices.Contains(serviceAffinities, string(spec.SessionAffinity)):
		errs = append(errs, field.NotSupported(path.Child("sessionAffinity"), spec.SessionAffinity, serviceAffinities))
	case spec.SessionAffinity == corev1.ServiceAffinityNone && spec.SessionAffinityConfig != nil:
		errs = append(errs, field.Forbidden(path.Child("sessionAffinityConfig"),
			fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
	case spec.SessionAffinity == corev1.ServiceAffinityClientIP:
		tp := path.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds")
		if c := spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			errs = append(errs, field.Required(tp, ""))
		} else if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
			errs = append(errs, field.Invalid(tp, t, fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds)))
		}
	}
	switch {
	case spec.Type == "":
		errs = append(errs, field.Required(path.Child("type"), ""))
	case !slices.Contains(serviceTypes, string(spec.Type)):
		errs = append(errs, field.NotSupported(path.Child("type"), spec.Type, serviceTypes))
	}
	errs = append(errs, validateClusterIPs(svc, path)...)
	errs = append(errs, validateTrafficPolicies(svc, path)...)
	return errs
}

// validateServicePort checks one port: its name (required when the service
// has several, a DNS label, unique), number, protocol and target port.
func validateServicePort(p *corev1.ServicePort, requireName bool, names map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case requireName && p.Name == "":
		errs = append(errs, field.Required(path.Child("name"), ""))
	case p.Name != "":
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), p.Name, msg))
		}
		if names[p.Name] {
			errs = append(errs, field.Duplicate(path.Child("name"), p.Name))
		}
		names[p.Name] = true
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		errs = append(errs, field.Invalid(path.Child("port"), p.Port, msg))
	}
	switch {
	case p.Protocol == "":
		errs = append(errs, field.Required(path.Child("protocol"), ""))
	case !slices.Contains(serviceProtocols, string(p.Protocol)):
		errs = append(errs, field.NotSupported(path.Child("protocol"), p.Protocol, serviceProtocols))
	}
	tp := path.Child("targetPort")
	switch p.TargetPort.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(p.TargetPort.IntValue()) {
			errs = append(errs, field.Invalid(tp, p.TargetPort.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(p.TargetPort.StrVal) {
			errs = append(errs, field.Invalid(tp, p.TargetPort.StrVal, msg))
		}
	}
	return errs
}

// validateClusterIPs checks clusterIP, clusterIPs and the IP families on an
// IPv4-only cluster.
func validateClusterIPs(svc *corev1.Service, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	ips := path.Child("clusterIPs")
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if len(spec.ClusterIPs) > 0 && spec.ClusterIP != spec.ClusterIPs[0] {
		errs = append(errs, field.Invalid(ips, spec.ClusterIPs, "first value must match `clusterIP`"))
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ips, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			if i != 0 || len(spec.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(ips, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, field.Invalid(ips.Index(i), ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		}
	}
	fp := path.Child("ipFamilyPolicy")
	if p := spec.IPFamilyPolicy; p == nil {
		errs = append(errs, field.Required(fp, ""))
	} else if !slices.Contains(serviceFamilyPolicies, string(*p)) {
		errs = append(errs, field.NotSupported(fp, *p, serviceFamilyPolicies))
	} else if *p == corev1.IPFamilyPolicyRequireDualStack && !(headless(svc) && len(spec.Selector) == 0) {
		errs = append(errs, field.Invalid(fp, *p, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range spec.IPFamilies {
		switch {
		case f != corev1.IPv4Protocol && f != corev1.IPv6Protocol:
			errs = append(errs, field.NotSupported(path.Child("ipFamilies").Index(i), f, []string{"IPv4", "IPv6"}))
		case f == corev1.IPv6Protocol && !(headless(svc) && len(spec.Selector) == 0):
			errs = append(errs, field.Invalid(path.Child("ipFamilies").Index(i), f, "not configured on this cluster"))
		}
	}
	return errs
}

// validateTrafficPolicies checks externalTrafficPolicy (only, and then
// required, where the service is reachable from outside) and
// internalTrafficPolicy.
func validateTrafficPolicies(svc *corev1.Service, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	ep := path.Child("externalTrafficPolicy")
	switch {
	case !externallyAccessible(svc) && spec.ExternalTrafficPolicy != "":
		errs = append(errs, field.Invalid(ep, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
	case externallyAccessible(svc) && spec.ExternalTrafficPolicy == "":
		errs = append(errs, field.Required(ep, ""))
	case externallyAccessible(svc) && !slices.Contains(trafficPolicies, string(spec.ExternalTrafficPolicy)):
		errs = append(errs, field.NotSupported(ep, spec.ExternalTrafficPolicy, trafficPolicies))
	}
	ip := path.Child("internalTrafficPolicy")
	switch p := spec.InternalTrafficPolicy; {
	case p == nil && (spec.Type == corev1.ServiceTypeClusterIP || spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer):
		errs = append(errs, field.Required(ip, ""))
	case p != nil && !slices.Contains(trafficPolicies, string(*p)):
		errs = append(errs, field.NotSupported(ip, *p, trafficPolicies))
	}
	if spec.AllocateLoadBalancerNodePorts != nil && spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(path.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	return errs
}

// validateServiceUpdate: a cluster IP never changes once set (a service
// may become or stop being ExternalName, and headless stays headless),
// with validateUpgradeDowngradeClusterIPs' messages.
func validateServiceUpdate(old, svc *corev1.Service) field.ErrorList {
	if old.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if headless(old) && headless(svc) {
		return nil
	}
	ips := field.NewPath("spec", "clusterIPs")
	a, b := old.Spec.ClusterIPs, svc.Spec.ClusterIPs
	switch {
	case len(a) > 0 && len(b) == 0:
		return field.ErrorList{field.Invalid(ips.Index(0), b, "primary clusterIP can not be unset")}
	case len(a) > 0 && a[0] != b[0]:
		return field.ErrorList{field.Invalid(ips.Index(0), b, "may not change once set")}
	}
	return nil
}
