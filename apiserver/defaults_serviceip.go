package apiserver

// Cluster IP allocation for Services, as kube-apiserver's IPAddress
// allocator (MultiCIDRServiceAllocator, GA in 1.33) does it: an address is
// taken by creating a networking.k8s.io IPAddress record named by the
// address in the store, so the store's create-if-absent is the arbiter. Two
// servers over one store, or two concurrent creates on one server, cannot
// both create the record, whatever either believed free; a cache or a
// bitmap in memory could not give that across servers.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// serviceCIDR is the range cluster IPs are allocated from: kube-apiserver's
// default --service-cluster-ip-range, as kubeadm and kind use it.
var serviceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// storeIPAddresses is the store resource of the address records.
const storeIPAddresses = "ipaddresses.networking.k8s.io"

// Allocation tuning: random draws before falling back to a listing, and
// listings before giving up when other writers keep taking the pick.
const (
	ipRandomDraws   = 16
	ipListAttempts  = 3
	ipStaticBandMin = 16
	ipStaticBandMax = 256
)

// ipRange describes a service range as offsets: usable offsets are 1..size-2
// (not the network or broadcast address); dynamic allocation takes the upper
// part, above the static band kube-apiserver leaves to users who choose
// their address (KEP-3070), so a chosen address rarely meets a taken one.
type ipRange struct {
	prefix      netip.Prefix
	base        uint32
	size        uint32
	staticBand  uint32 // offsets 1..staticBand are preferred for chosen IPs
	dynamicSize uint32 // offsets staticBand+1 .. size-2
}

// newIPRange describes an IPv4 prefix of at least 4 addresses. Ranges of
// fewer than 16 usable addresses have no static band, as upstream's.
func newIPRange(p netip.Prefix) ipRange {
	b := p.Masked().Addr().As4()
	size := uint32(1) << (32 - p.Bits())
	var band uint32
	if size-2 >= ipStaticBandMin {
		band = min(max((size-2)/16, ipStaticBandMin), ipStaticBandMax)
	}
	return ipRange{prefix: p.Masked(), base: binary.BigEndian.Uint32(b[:]), size: size, staticBand: band, dynamicSize: size - 2 - band}
}

func (r ipRange) addr(offset uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], r.base+offset)
	return netip.AddrFrom4(b).String()
}

// offset returns ip's offset in the range, false when it is outside the
// usable addresses.
func (r ipRange) offset(ip netip.Addr) (uint32, bool) {
	if !ip.Is4() || !r.prefix.Contains(ip) {
		return 0, false
	}
	b := ip.As4()
	off := binary.BigEndian.Uint32(b[:]) - r.base
	return off, off != 0 && off != r.size-1
}

// allocateServiceIP gives svc its cluster IP unless it has none by nature
// (ExternalName, headless): the one it asks for when that is in range and
// free, otherwise a free one drawn from the dynamic part of the range. It
// returns a release that frees the address again, for a create that fails
// after allocating (kube-apiserver's allocator transaction rolls back the
// same way). Errors are kube-apiserver's 422 on spec.clusterIPs[0].
func (s *Server) allocateServiceIP(ctx context.Context, svc *corev1.Service) (release func(context.Context), err error) {
	return s.allocateServiceIPIn(ctx, newIPRange(serviceCIDR), svc)
}

// allocateServiceIPIn is allocateServiceIP from range r.
func (s *Server) allocateServiceIPIn(ctx context.Context, r ipRange, svc *corev1.Service) (release func(context.Context), err error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return func(context.Context) {}, nil
	}
	path := field.NewPath("spec", "clusterIPs").Index(0)
	invalid := func(ip, msg string) error {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name,
			field.ErrorList{field.Invalid(path, ip, fmt.Sprintf("failed to allocate IP %s: %s", ip, msg))})
	}
	if want := svc.Spec.ClusterIP; want != "" {
		ip, perr := netip.ParseAddr(want)
		if perr != nil {
			return nil, invalid(want, "must be a valid IP address")
		}
		if _, ok := r.offset(ip); !ok {
			return nil, invalid(want, fmt.Sprintf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", want, r.prefix))
		}
		taken, err := s.claimServiceIP(ctx, ip.String(), svc)
		if err != nil {
			return nil, err
		}
		if taken {
			return nil, invalid(want, "provided IP is already allocated")
		}
		return s.ipRelease(ip.String()), nil
	}
	for range ipRandomDraws {
		if r.dynamicSize == 0 {
			break
		}
		s.mu.Lock()
		off := r.staticBand + 1 + uint32(s.rnd.Uint64N(uint64(r.dynamicSize)))
		s.mu.Unlock()
		taken, err := s.claimServiceIP(ctx, r.addr(off), svc)
		if err != nil {
			return nil, err
		}
		if !taken {
			return s.setServiceIP(svc, r.addr(off)), nil
		}
	}
	// A crowded range: list what is taken and try the free addresses, the
	// dynamic part first, then the static band, as kube-apiserver does.
	for range ipListAttempts {
		objs, _, err := s.store.List(ctx, storeIPAddresses, "")
		if err != nil {
			return nil, storeError(err, networkingv1.SchemeGroupVersion.WithResource("ipaddresses").GroupResource(), "")
		}
		used := make(map[string]bool, len(objs))
		for _, o := range objs {
			used[o.Key.Name] = true
		}
		order := func(yield func(uint32) bool) {
			for off := r.staticBand + 1; off < r.size-1; off++ {
				if !yield(off) {
					return
				}
			}
			for off := uint32(1); off <= r.staticBand; off++ {
				if !yield(off) {
					return
				}
			}
		}
		for off := range order {
			ip := r.addr(off)
			if used[ip] {
				continue
			}
			taken, err := s.claimServiceIP(ctx, ip, svc)
			if err != nil {
				return nil, err
			}
			if !taken {
				return s.setServiceIP(svc, ip), nil
			}
			used[ip] = true
		}
	}
	return nil, apierrors.NewInternalError(fmt.Errorf("allocating a cluster IP for service %s/%s: range %s is full", svc.Namespace, svc.Name, r.prefix))
}

// setServiceIP records an allocated ip on svc and returns its release.
func (s *Server) setServiceIP(svc *corev1.Service, ip string) func(context.Context) {
	svc.Spec.ClusterIP = ip
	svc.Spec.ClusterIPs = []string{ip}
	return s.ipRelease(ip)
}

// claimServiceIP creates ip's record for svc; taken reports that a record
// already exists.
func (s *Server) claimServiceIP(ctx context.Context, ip string, svc *corev1.Service) (taken bool, err error) {
	rec := networkingv1.IPAddress{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol), networkingv1.LabelManagedBy: "ipallocator.k8s.io"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: svc.Namespace, Name: svc.Name}},
	}
	data, err := json.Marshal(&rec)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("encoding IPAddress %s: %w", ip, err))
	}
	_, err = s.store.Create(ctx, raftstore.Key{Resource: storeIPAddresses, Name: ip}, data)
	if errors.Is(err, raftstore.ErrExists) {
		return true, nil
	}
	if err != nil {
		return false, storeError(err, networkingv1.SchemeGroupVersion.WithResource("ipaddresses").GroupResource(), ip)
	}
	return false, nil
}

// ipRelease returns a function that deletes ip's record.
func (s *Server) ipRelease(ip string) func(context.Context) {
	return func(ctx context.Context) { s.releaseServiceIP(ctx, ip) }
}

// releaseServiceIP deletes ip's record, so the address can be allocated
// again; a record already gone is no error. A failure leaves the address
// taken (a leak, never a double allocation), and is logged.
func (s *Server) releaseServiceIP(ctx context.Context, ip string) {
	if ip == "" || ip == corev1.ClusterIPNone {
		return
	}
	_, err := s.store.Delete(ctx, raftstore.Key{Resource: storeIPAddresses, Name: ip}, raftstore.Preconditions{})
	if err != nil && !errors.Is(err, raftstore.ErrNotFound) {
		s.log.Warn("releasing a cluster IP", "ip", ip, "err", err)
	}
}

// releaseServiceIPs frees the cluster IPs of a deleted service.
func (s *Server) releaseServiceIPs(ctx context.Context, svc *corev1.Service) {
	for _, ip := range svc.Spec.ClusterIPs {
		s.releaseServiceIP(ctx, ip)
	}
}
