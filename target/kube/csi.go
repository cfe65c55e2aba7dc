package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/cluster/storage"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/target"
)

// podsafe's RWO volumes on the kube target: a CSI driver whose "storage" is
// podsafe's storage server (NFS-like, no locking of its own, every write in
// the ledger) and whose controller half, run in the harness as an ordinary
// client, provisions a persistent volume for each claim of StorageClass and
// marks the attachments Kubernetes' attach/detach controller makes as
// attached (the external-attacher's job) and detached. Which node a volume
// is attached to, and when it moves, is Kubernetes' decision: the
// attach/detach controller's, which is what PS-15 judges there.
const (
	// CSIDriver is the driver's name (CSIDriver object, the persistent
	// volumes' spec.csi.driver, the attachments' spec.attacher).
	CSIDriver = "storage.podsafe.io"
	// StorageClass provisions podsafe's RWO volumes.
	StorageClass = "podsafe-rwo"
	// CSIUser is the driver's controller (bound to CSIClusterRole).
	CSIUser = "podsafe:csi"
	// StorageComponent is the host of the storage server and of the
	// driver's controller.
	StorageComponent = "storage"
	// StoragePort is the storage server's port.
	StoragePort = 7480
	// csiFinalizer holds an attachment until the driver detached it, as
	// the external-attacher's does.
	csiFinalizer = "external-attacher/storage-podsafe-io"
)

// CSIClusterRole is what podsafe's CSI controller may do: provision and
// delete persistent volumes for claims, and mark attachments attached.
func CSIClusterRole() *rbacv1.ClusterRole {
	rule := policyRule
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "podsafe:csi-controller"},
		Rules: []rbacv1.PolicyRule{
			rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch"),
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "create", "delete"),
			rule("storage.k8s.io", []string{"volumeattachments"}, "get", "list", "watch", "update", "patch"),
			rule("storage.k8s.io", []string{"volumeattachments/status"}, "update", "patch"),
			rule("", []string{"events"}, "create", "patch", "update"),
		},
	}
}

// StorageOptions start the storage.
type StorageOptions struct {
	// Ledger records every write the storage server receives.
	Ledger kubelet.Ledger
	// WrapTransport, when set, wraps the CSI controller's HTTP transport;
	// it is given Identity, so its API calls are recorded with it.
	WrapTransport func(identity string) func(http.RoundTripper) http.RoundTripper
	Identity      string
	// CompareTokens makes the storage compare fencing tokens
	// (storage.Server.CompareTokens).
	CompareTokens bool
}

// storageState is the running storage server and CSI controller.
type storageState struct {
	srv    *storage.Server
	ln     net.Listener
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
}

// ErrNoStorage: the operation needs StartStorage first.
var ErrNoStorage = errors.New("no storage on the cluster (StartStorage)")

// StartStorage starts the storage server on a host of its own, creates the
// StorageClass and CSIDriver, and runs the CSI controller as user CSIUser.
// Kubelets started after it write their pets' volumes there, and find
// their attachments as the real kubelet does (kubelet.Config.CSIAttachments).
// On an existing cluster it is refused: podsafe does not install a storage
// driver in a cluster it did not start.
func (c *Cluster) StartStorage(ctx context.Context, opts StorageOptions) error {
	if c.ext != nil {
		return fmt.Errorf("storage: %w", ErrExternalStorage)
	}
	c.mu.Lock()
	running := c.storage != nil
	c.mu.Unlock()
	if running {
		return fmt.Errorf("storage: %w", target.ErrRunning)
	}
	a, err := c.addHost(ctx, StorageComponent, target.RoleStorage, -1, "")
	if err != nil {
		return err
	}
	addr := hostport(a, StoragePort)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("starting the storage server on %s: %w", addr, err)
	}
	srv := newStorageServer(opts.Ledger, c)
	srv.CompareTokens(opts.CompareTokens)
	go func() {
		if err := srv.Serve(ln); err != nil {
			c.log.Warn("storage server stopped", "err", err)
		}
	}()
	fail := func(err error) error {
		ln.Close()
		return err
	}
	admin, err := c.clientFor(AdminUser, "", 0)
	if err != nil {
		return fail(err)
	}
	if err := c.installStorage(ctx, admin); err != nil {
		return fail(err)
	}
	rc, err := c.RESTConfig(CSIUser, StorageComponent, 0)
	if err != nil {
		return fail(err)
	}
	if opts.WrapTransport != nil {
		rc.WrapTransport = opts.WrapTransport(opts.Identity)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail(fmt.Errorf("client of the CSI controller: %w", err))
	}
	runCtx, cancel := context.WithCancel(context.Background())
	st := &storageState{srv: srv, ln: ln, addr: addr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		(&csiController{cs: cs, log: c.log.With("component", "csi-controller")}).run(runCtx)
	}()
	c.mu.Lock()
	c.storage = st
	c.mu.Unlock()
	c.log.Info("storage started", "addr", addr, "driver", CSIDriver, "class", StorageClass)
	return nil
}

// newStorageServer is a storage server recording into ledger that names
// each writer by the node whose host address its connection comes from.
func newStorageServer(ledger kubelet.Ledger, c *Cluster) *storage.Server {
	srv := storage.NewServer(ledger, nil)
	srv.NodeOf = c.nodeOfAddr
	return srv
}

// ErrExternalStorage: the kubeconfig target has no podsafe storage.
var ErrExternalStorage = errors.New("podsafe installs no storage driver in an existing cluster")

// installStorage creates the StorageClass, the CSIDriver (attachment
// required, so the attach/detach controller attaches its volumes) and the
// CSI controller's RBAC.
func (c *Cluster) installStorage(ctx context.Context, cs kubernetes.Interface) error {
	bind := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	role := CSIClusterRole()
	steps := []struct {
		what string
		do   func() error
	}{
		{"creating StorageClass " + StorageClass, func() error {
			_, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
				ObjectMeta: metav1.ObjectMeta{Name: StorageClass}, Provisioner: CSIDriver,
				VolumeBindingMode: &bind, ReclaimPolicy: &reclaim,
			}, metav1.CreateOptions{})
			return err
		}},
		{"creating CSIDriver " + CSIDriver, func() error {
			_, err := cs.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
				ObjectMeta: metav1.ObjectMeta{Name: CSIDriver},
				Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false)},
			}, metav1.CreateOptions{})
			return err
		}},
		{"creating ClusterRole " + role.Name, func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		}},
		{"binding " + CSIUser, func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "podsafe-csi"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: CSIUser}},
			}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := createRetrying(ctx, s.what, s.do); err != nil {
			return err
		}
	}
	return nil
}

// nodeOfAddr names the node whose kubelet has address host.
func (c *Cluster) nodeOfAddr(host string) (string, bool) {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, comp := range c.comps {
		if comp.Role == target.RoleKubelet && c.hosts[comp.Host] == a {
			return comp.Node, true
		}
	}
	return "", false
}

// storageClient is a client of the storage server whose connections come
// from node's address (nil without storage).
func (c *Cluster) storageClient(node string) *storage.Client {
	c.mu.Lock()
	st := c.storage
	local, ok := c.hosts[NodeHost(node)]
	c.mu.Unlock()
	if st == nil || !ok {
		return nil
	}
	dialer := &net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}
	tr := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	return &storage.Client{BaseURL: "http://" + st.addr, HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// Storage is the storage server, once StartStorage ran.
func (c *Cluster) Storage() (*storage.Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storage == nil {
		return nil, ErrNoStorage
	}
	return c.storage.srv, nil
}

// stopStorage stops the CSI controller and the storage server.
func (c *Cluster) stopStorage() {
	c.mu.Lock()
	st := c.storage
	c.storage = nil
	c.mu.Unlock()
	if st == nil {
		return
	}
	st.cancel()
	<-st.done
	st.ln.Close()
}

// csiController is the controller half of podsafe's CSI driver.
type csiController struct {
	cs  kubernetes.Interface
	log interface {
		Warn(msg string, args ...any)
		Info(msg string, args ...any)
	}
}

// run provisions, deletes and attaches until ctx ends: informers on claims,
// volumes and attachments, each change reconciled at once and every object
// again every 10 s (a failed write is retried then).
func (d *csiController) run(ctx context.Context) {
	f := informers.NewSharedInformerFactory(d.cs, 10*time.Second)
	pvcs := f.Core().V1().PersistentVolumeClaims().Informer()
	pvs := f.Core().V1().PersistentVolumes().Informer()
	vas := f.Storage().V1().VolumeAttachments().Informer()
	handle := func(fn func(context.Context, any)) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { fn(ctx, o) },
			UpdateFunc: func(_, o any) { fn(ctx, o) },
		}
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  func(context.Context, any)
	}{{pvcs, d.provision}, {pvs, d.reclaim}, {vas, d.attach}} {
		if _, err := h.inf.AddEventHandler(handle(h.fn)); err != nil {
			d.log.Warn("csi controller", "err", err)
			return
		}
	}
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}

// provision creates the persistent volume of a claim of StorageClass,
// bound to it in advance (Kubernetes' persistent volume controller then
// binds the claim): its handle is the claim's podsafe volume ID, the name
// the storage and the ledger know it by.
func (d *csiController) provision(ctx context.Context, o any) {
	pvc, ok := o.(*corev1.PersistentVolumeClaim)
	if !ok || ptr.Deref(pvc.Spec.StorageClassName, "") != StorageClass || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
		return
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID),
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": CSIDriver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClass,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: CSIDriver, VolumeHandle: kubelet.VolumeID(pvc.Namespace, pvc.Name)}},
		},
	}
	if _, err := d.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
		d.log.Warn("provisioning", "claim", pvc.Namespace+"/"+pvc.Name, "err", err)
	}
}

// reclaim deletes a released volume of the driver (reclaim policy Delete).
func (d *csiController) reclaim(ctx context.Context, o any) {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != CSIDriver || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.DeletionTimestamp != nil {
		return
	}
	err := d.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		d.log.Warn("reclaiming", "volume", pv.Name, "err", err)
	}
}

// attach does what the external-attacher does for the driver's
// attachments: hold a new one with a finalizer and mark it attached (the
// storage has no attach step of its own: it takes writes from anyone, as
// PS-15 supposes); once it is being deleted, detach it by releasing the
// finalizer.
func (d *csiController) attach(ctx context.Context, o any) {
	va, ok := o.(*storagev1.VolumeAttachment)
	if !ok || va.Spec.Attacher != CSIDriver {
		return
	}
	vas := d.cs.StorageV1().VolumeAttachments()
	has := slices.Contains(va.Finalizers, csiFinalizer)
	switch {
	case va.DeletionTimestamp != nil && has:
		va = va.DeepCopy()
		va.Finalizers = slices.DeleteFunc(va.Finalizers, func(f string) bool { return f == csiFinalizer })
		if _, err := vas.Update(ctx, va, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			d.log.Warn("detaching", "attachment", va.Name, "err", err)
		}
	case va.DeletionTimestamp != nil:
	case !has:
		va = va.DeepCopy()
		va.Finalizers = append(va.Finalizers, csiFinalizer)
		if _, err := vas.Update(ctx, va, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
			d.log.Warn("attaching", "attachment", va.Name, "err", err)
		}
	case !va.Status.Attached:
		va = va.DeepCopy()
		va.Status.Attached = true
		va.Status.AttachmentMetadata = map[string]string{"node": va.Spec.NodeName, "generation": strconv.FormatInt(va.Generation, 10)}
		if _, err := vas.UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
			d.log.Warn("attaching", "attachment", va.Name, "err", err)
		}
	}
}
