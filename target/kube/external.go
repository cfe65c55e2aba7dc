package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsafe/podsafe/target"
)

// The third target: an existing cluster reached through a kubeconfig.
// podsafe starts no process there. It registers its own simulated nodes
// (each tainted NodeTaint and labelled NodeLabel, so that only podsafe's
// workloads, which tolerate the taint and select the label, land on them),
// runs its kubelets and, if asked, its fencing controller in the harness,
// and injects only the faults it owns: crash, pause and power-off of its
// own nodes, and cuts of their links, made at their own sockets (gateNet).
// The cluster's control plane is one component, "apiserver", on host
// "cluster": its links to podsafe's nodes can be cut, nothing else can be
// done to it.

// NodeLabel and NodeTaint mark podsafe's nodes in an existing cluster.
const (
	NodeLabel = "podsafe.io/node"
	NodeTaint = "podsafe.io/node"
)

// ExternalHost is the host of an existing cluster's control plane, and
// ExternalAPIServer its one component.
const (
	ExternalHost      = "cluster"
	ExternalAPIServer = "apiserver"
)

// ExternalConfig describes an existing cluster.
type ExternalConfig struct {
	// Kubeconfig is the kubeconfig file (its current context). Required.
	// Its user must be able to create Nodes and, for node identities,
	// impersonate users (a cluster admin can).
	Kubeconfig string
	// Context overrides the kubeconfig's current context.
	Context string
	// Timings of podsafe's kubelets (the lease and status periods).
	Timings Timings
	// Logger receives the target's log (nil: discard).
	Logger *slog.Logger
}

// external is what a Cluster needs to act on an existing cluster.
type external struct {
	base *rest.Config
	// impersonate: the kubeconfig's user may impersonate, so each kubelet
	// acts as system:node:NAME (Node authorizer, NodeRestriction) and the
	// fencing controller as podsafe:fencing (FencingClusterRole).
	impersonate bool
	// why says why nodes act under the kubeconfig's own identity ("" when
	// they are impersonated).
	why     string
	server  string
	version string
	// created are the cluster-scoped objects podsafe made, removed on Close.
	nodes []string
	// rbac: the fencing controller's role is there to impersonate it;
	// madeRBAC: podsafe created it (and removes it on Close).
	rbac, madeRBAC bool
	preexists      map[string]bool // namespaces there before the run
}

// selfReview asks whether the caller may verb resource (core group), in
// any namespace.
func selfReview(verb, resource string) *authorizationv1.SelfSubjectAccessReview {
	return &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: resource},
	}}
}

// NewExternal connects to the cluster kubeconfig names and checks that
// podsafe can register nodes there. Nothing is created until StartKubelets.
func NewExternal(ctx context.Context, cfg ExternalConfig) (*Cluster, error) {
	if cfg.Kubeconfig == "" {
		return nil, fmt.Errorf("%w: an existing cluster needs --kubeconfig", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Timings.fill()
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig}
	over := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	base, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: kubeconfig %s: %w", ErrInvalidConfig, cfg.Kubeconfig, err)
	}
	base.QPS = -1
	cs, err := kubernetes.NewForConfig(base)
	if err != nil {
		return nil, fmt.Errorf("%w: kubeconfig %s: %w", ErrInvalidConfig, cfg.Kubeconfig, err)
	}
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reaching the cluster of %s at %s: %w", cfg.Kubeconfig, base.Host, err)
	}
	ext := &external{base: base, server: base.Host, version: v.GitVersion, preexists: map[string]bool{}}
	nss, err := cs.CoreV1().Namespaces().List(vctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the namespaces of %s: %w", base.Host, err)
	}
	for _, ns := range nss.Items {
		ext.preexists[ns.Name] = true
	}
	c := &Cluster{
		cfg: Config{Dir: "", Timings: cfg.Timings, Logger: cfg.Logger}, log: cfg.Logger,
		procs: map[string]*proc{}, hosts: map[string]netip.Addr{},
		exitsInRow: map[string]int{}, lastExit: map[string]time.Time{},
		ext: ext, net: newGateNet(), mode: NetworkSockets,
	}
	c.cfg.Binaries.Versions.Kubernetes = v.GitVersion
	c.comps = append(c.comps, target.Component{Name: ExternalAPIServer, Role: target.RoleAPIServer, Host: ExternalHost, Member: -1})
	ext.impersonate, ext.why = c.canImpersonate(vctx)
	return c, nil
}

// PlanExternal is the kubeconfig target with nodes and (fencing) the
// fencing controller as podsafe would run it on an existing cluster,
// without connecting to one: its components and what can be done to them,
// for `podsafe list --target kubeconfig`. Only Kind, Components, Can and
// Members are meaningful on it.
func PlanExternal(nodes []string, fencing bool) *Cluster {
	gn := newGateNet()
	c := &Cluster{cfg: Config{Logger: slog.New(slog.DiscardHandler)}, log: slog.New(slog.DiscardHandler),
		procs: map[string]*proc{}, hosts: map[string]netip.Addr{}, ext: &external{}, net: gn, mode: NetworkSockets}
	c.comps = append(c.comps, target.Component{Name: ExternalAPIServer, Role: target.RoleAPIServer, Host: ExternalHost, Member: -1})
	if fencing {
		gn.addLocal(context.Background(), FencingComponent)
		c.comps = append(c.comps, target.Component{Name: FencingComponent, Role: target.RoleFencing, Host: FencingComponent, Member: -1})
	}
	for _, n := range nodes {
		gn.addLocal(context.Background(), NodeHost(n))
		c.comps = append(c.comps, target.Component{Name: KubeletComponent(n), Role: target.RoleKubelet, Host: NodeHost(n), Member: -1, Node: n})
	}
	return c
}

// NetworkSockets is the network mode of an existing cluster: podsafe's own
// hosts' links are cut at their sockets (gateNet).
const NetworkSockets = "sockets"

// External reports whether the cluster is an existing one (the kubeconfig
// target).
func (c *Cluster) External() bool { return c.ext != nil }

// ServerVersion is the cluster's version (an existing cluster's, as its API
// server reports it).
func (c *Cluster) ServerVersion() string { return c.cfg.Binaries.Versions.Kubernetes }

// NodeIdentity says under which identity podsafe's kubelets act on an
// existing cluster: their own node identities (impersonated), or the
// kubeconfig's user, and why.
func (c *Cluster) NodeIdentity() string {
	if c.ext == nil || c.ext.impersonate {
		return "system:node:NAME (group system:nodes)"
	}
	return "the kubeconfig's own user: " + c.ext.why
}

// canImpersonate asks the API server whether the kubeconfig's user may
// impersonate users and groups, as the kubelets' node identities need.
func (c *Cluster) canImpersonate(ctx context.Context) (bool, string) {
	cs, err := kubernetes.NewForConfig(c.ext.base)
	if err != nil {
		return false, err.Error()
	}
	for _, res := range []string{"users", "groups"} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, selfReview("impersonate", res), metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Sprintf("asking whether it may impersonate %s: %v", res, err)
		}
		if !r.Status.Allowed {
			return false, fmt.Sprintf("it may not impersonate %s, so the Node authorizer and NodeRestriction do not judge podsafe's kubelets", res)
		}
	}
	return true, ""
}

// externalRESTConfig is RESTConfig on an existing cluster: the kubeconfig's
// server and credentials, impersonating user where the cluster allows and
// user is not the kubeconfig's own role, dialing through host's gate.
func (c *Cluster) externalRESTConfig(user, host string) (*rest.Config, error) {
	rc := rest.CopyConfig(c.ext.base)
	// JSON, so the history's transport can read every answer (see
	// RESTConfig).
	rc.ContentType, rc.AcceptContentTypes = "application/json", "application/json"
	if c.ext.impersonate {
		switch {
		case strings.HasPrefix(user, "system:node:"):
			rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:nodes", "system:authenticated"}}
		case user == FencingUser && c.ext.rbac:
			rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"podsafe:fencing", "system:authenticated"}}
		}
	}
	var g *gate
	if host != "" {
		gn, ok := c.net.(*gateNet)
		if !ok || gn.gateOf(host) == nil {
			return nil, fmt.Errorf("%w: no host %q", target.ErrUnknownComponent, host)
		}
		g = gn.gateOf(host)
	}
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 5 * time.Second}
	if g != nil {
		rc.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return g.dial(ctx, dialer, network, addr)
		}
	}
	return rc, nil
}

// registerExternal prepares an existing cluster for podsafe's nodes: none
// of their names may belong to a node that is not podsafe's, a node of
// podsafe's left by an earlier run is removed, and the fencing
// controller's role is made when podsafe may impersonate.
func (c *Cluster) registerExternal(ctx context.Context, nodes []NodeSpec) error {
	cs, err := kubernetes.NewForConfig(c.ext.base)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		old, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("looking for node %s in the cluster: %w", n.Name, err)
		case old.Labels[NodeLabel] != "true":
			return fmt.Errorf("%w: the cluster already has a node %s that is not podsafe's: name podsafe's nodes otherwise (a scenario file's topology)", ErrInvalidConfig, n.Name)
		default:
			if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing podsafe's node %s left by an earlier run: %w", n.Name, err)
			}
		}
		c.ext.nodes = append(c.ext.nodes, n.Name)
	}
	if c.ext.impersonate {
		role := FencingClusterRole()
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
		}
		made := err == nil
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "podsafe-fencing"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: FencingUser}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("binding %s: %w", FencingUser, err)
		}
		c.ext.rbac, c.ext.madeRBAC = true, made
	}
	return nil
}

// externalSpec marks a node spec as podsafe's: labelled and tainted so
// that only podsafe's workloads land there.
func externalSpec(n NodeSpec) NodeSpec {
	labels := map[string]string{NodeLabel: "true"}
	for k, v := range n.Labels {
		labels[k] = v
	}
	n.Labels = labels
	n.Taints = append([]corev1.Taint{{Key: NodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}, n.Taints...)
	return n
}

// Placement makes a pod spec land on podsafe's nodes of an existing
// cluster: it tolerates their taint and selects their label. On a cluster
// podsafe runs, it changes nothing.
func (c *Cluster) Placement(spec *corev1.PodSpec) {
	if c.ext == nil {
		return
	}
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[NodeLabel] = "true"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: NodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}

// closeExternal removes what podsafe made in an existing cluster: its
// nodes (their pods are then the cluster's pod GC's), the namespaces its
// workloads created, and the fencing controller's role.
func (c *Cluster) closeExternal() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.ext.base)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range c.ext.nodes {
		if err := cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing node %s: %w", n, err))
		}
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, ns := range nss.Items {
			if strings.HasPrefix(ns.Name, "podsafe-") && !c.ext.preexists[ns.Name] {
				if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("removing namespace %s: %w", ns.Name, err))
				}
			}
		}
	}
	if c.ext.madeRBAC {
		if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, "podsafe-fencing", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
		if err := cs.RbacV1().ClusterRoles().Delete(ctx, FencingClusterRole().Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
