package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podsafe/podsafe/raftstore"
)

// generateNameAttempts bounds the retries of a create whose generated name
// collided with an existing object.
const generateNameAttempts = 8

// nameSuffixChars are the characters of generated name suffixes: no vowels
// (no words) and no look-alike digits.
const nameSuffixChars = "bcdfghjklmnpqrstvwxz2456789"

// Generated names are generateName, cut to maxGeneratedPrefix, followed by
// generatedSuffixLength random characters, as Kubernetes makes them: at most
// 63 characters, a valid DNS label or subdomain whenever the prefix with any
// suffix is one (see nameValidator).
const (
	generatedSuffixLength = 5
	maxGeneratedPrefix    = 63 - generatedSuffixLength
)

// generatedNameSample is a suffix that stands for every generated one: any
// character of nameSuffixChars is valid wherever another is.
const generatedNameSample = "xxxxx"

// generatedName is the name generateName prefix gives with suffix.
func generatedName(prefix, suffix string) string {
	if len(prefix) > maxGeneratedPrefix {
		prefix = prefix[:maxGeneratedPrefix]
	}
	return prefix + suffix
}

// generateName returns a name made of prefix and random characters.
func (s *Server) generateName(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := make([]byte, generatedSuffixLength)
	for i := range b {
		b[i] = nameSuffixChars[s.rnd.IntN(len(nameSuffixChars))]
	}
	return generatedName(prefix, string(b))
}

// writeWarnings adds Warning headers, as kube-apiserver does for unknown
// fields under fieldValidation=Warn.
func writeWarnings(w http.ResponseWriter, warnings []string) {
	const maxWarnings = 16
	for i, msg := range warnings {
		if i == maxWarnings {
			break
		}
		w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
	}
}

// checkNamespace makes the object's namespace the URL's: a different one is
// a 400, a missing one is filled in.
func checkNamespace(ri *requestInfo, m metav1.Object) error {
	if !ri.res.namespaced {
		m.SetNamespace("")
		return nil
	}
	if ns := m.GetNamespace(); ns != "" && ns != ri.namespace {
		return apierrors.NewBadRequest(fmt.Sprintf(
			"the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", ns, ri.namespace))
	}
	m.SetNamespace(ri.namespace)
	return nil
}

// serveCreate answers POST on a collection.
func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	data, warnings, err := s.create(r, ri)
	if err != nil {
		writeError(w, err)
		return
	}
	writeWarnings(w, warnings)
	// The answer is the object as stored, as a GET answers it: not decoded
	// and encoded again (a tenth of a create's CPU).
	writeStored(w, http.StatusCreated, ri.res, data)
}

// create decodes, authorizes, defaults, validates, admits and stores a new
// object, and returns its stored encoding.
func (s *Server) create(r *http.Request, ri *requestInfo) ([]byte, []string, error) {
	ctx, err := s.withFieldManager(r, "CreateOptions")
	if err != nil {
		return nil, nil, err
	}
	validation, err := fieldValidation(r)
	if err != nil {
		return nil, nil, err
	}
	obj, warnings, err := decodeBody(r, ri.res.gvk, validation)
	if err != nil {
		return nil, nil, err
	}
	m, err := metaOf(obj)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	if err := checkNamespace(ri, m); err != nil {
		return nil, nil, err
	}
	data, err := s.createStored(ctx, ri, obj, m)
	return data, warnings, err
}

// createObject defaults, authorizes, admits, validates and stores obj, a
// new object of ri's resource whose metadata is m, and returns the object
// created.
func (s *Server) createObject(ctx context.Context, ri *requestInfo, obj runtime.Object, m metav1.Object) (runtime.Object, error) {
	data, err := s.createStored(ctx, ri, obj, m)
	if err != nil {
		return nil, err
	}
	return ri.res.decodeStored(data)
}

// createStored is createObject answering the object's stored encoding.
func (s *Server) createStored(ctx context.Context, ri *requestInfo, obj runtime.Object, m metav1.Object) ([]byte, error) {
	managed := m.GetManagedFields()
	prepareCreate(ri.res, obj)
	m.SetManagedFields(managed)
	trackCreate(ctx, ri, obj)
	if err := s.authorize(Request{Identity: IdentityFrom(ctx), Verb: VerbCreate, Resource: ri.res.gr,
		Namespace: ri.namespace, Name: m.GetName(), Object: obj}); err != nil {
		return nil, err
	}
	if err := s.admitNamespaceLifecycle(ctx, ri, obj); err != nil {
		return nil, err
	}
	var err error
	switch o := obj.(type) {
	case *corev1.Pod:
		err = s.admitPodPriority(ctx, o)
	case *schedulingv1.PriorityClass:
		err = s.admitPriorityClass(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	if svc, ok := obj.(*corev1.Service); ok {
		// Validated before an address is taken; the address is given back
		// if the Service is not created after all. Its name is drawn
		// first, since the address names its Service.
		if m.GetName() == "" && m.GetGenerateName() != "" {
			m.SetName(s.generateName(m.GetGenerateName()))
		}
		if err := validateCreate(ri.res, obj); err != nil {
			return nil, err
		}
		release, err := s.allocateServiceIP(ctx, svc)
		if err != nil {
			return nil, err
		}
		data, err := s.storeCreated(ctx, ri, obj, m)
		if err != nil {
			release(context.WithoutCancel(ctx))
		}
		return data, err
	}
	return s.storeCreated(ctx, ri, obj, m)
}

// storeCreated validates obj and creates it in the store, drawing a fresh
// name from generateName until one is free; it returns the stored encoding.
func (s *Server) storeCreated(ctx context.Context, ri *requestInfo, obj runtime.Object, m metav1.Object) ([]byte, error) {
	generate := m.GetName() == "" && m.GetGenerateName() != ""
	for attempt := 0; ; attempt++ {
		if generate {
			m.SetName(s.generateName(m.GetGenerateName()))
		}
		if err := validateCreate(ri.res, obj); err != nil {
			return nil, err
		}
		data, err := ri.res.encodeForStore(obj)
		if err != nil {
			return nil, err
		}
		key := raftstore.Key{Resource: ri.res.storeKey, Namespace: ri.namespace, Name: m.GetName()}
		created, err := s.store.Create(ctx, key, data)
		if errors.Is(err, raftstore.ErrExists) && generate && attempt+1 < generateNameAttempts {
			continue
		}
		if err != nil {
			return nil, storeError(err, ri.res.gr, m.GetName())
		}
		return created.Data, nil
	}
}

// serveUpdate answers PUT on an object or its status.
func (s *Server) serveUpdate(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	ctx, err := s.withFieldManager(r, "UpdateOptions")
	if err != nil {
		writeError(w, err)
		return
	}
	validation, err := fieldValidation(r)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, warnings, err := decodeBody(r, ri.res.gvk, validation)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := metaOf(obj)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	userRV, err := parseRV(m.GetResourceVersion())
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	var out runtime.Object
	for attempt := 0; ; attempt++ {
		out, err = s.guaranteedUpdate(ctx, ri.res, ri.key(), func(cur runtime.Object, curRV uint64) (runtime.Object, error) {
			if userRV != 0 && userRV != curRV {
				return nil, conflict(ri.res.gr, ri.name)
			}
			return s.prepareUpdate(ctx, ri, VerbUpdate, cur, obj.DeepCopyObject())
		})
		if !apierrors.IsNotFound(err) || !ri.res.createOnUpdate || ri.subresource != "" || attempt >= s.cfg.MaxConflictRetries {
			break
		}
		// Upstream creates it, whatever resourceVersion the client sent
		// (the version names an object that is gone); should another
		// writer create it first, the update is tried again.
		fresh := obj.DeepCopyObject()
		fm, _ := metaOf(fresh)
		if err = checkNamespace(ri, fm); err != nil || fm.GetName() != ri.name {
			if err == nil {
				err = apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", fm.GetName(), ri.name))
			}
			break
		}
		// createObject clears the system metadata (resourceVersion, uid,
		// timestamps) as kube-apiserver's create-through-update does.
		out, err = s.createObject(ctx, ri, fresh, fm)
		if err == nil {
			code = http.StatusCreated
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeWarnings(w, warnings)
	writeObject(w, code, ri.res, out)
}

// prepareUpdate turns a client's version of an object (from PUT or a patch)
// into the object to store over cur: URL name and namespace enforced, system
// metadata kept, the main resource keeping the stored status and /status
// changing nothing but the status; then validation and authority.
func (s *Server) prepareUpdate(ctx context.Context, ri *requestInfo, verb string, cur, upd runtime.Object) (runtime.Object, error) {
	curMeta, err := metaOf(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	updMeta, err := metaOf(upd)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if name := updMeta.GetName(); name != "" && name != ri.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, ri.name))
	}
	updMeta.SetName(ri.name)
	if err := checkNamespace(ri, updMeta); err != nil {
		return nil, err
	}
	if uid := updMeta.GetUID(); uid != "" && uid != curMeta.GetUID() {
		return nil, apierrors.NewConflict(ri.res.gr, ri.name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, curMeta.GetUID()))
	}
	var out runtime.Object
	switch ri.subresource {
	case subStatus:
		out = cur.DeepCopyObject()
		setStatus(out, upd)
	case subFinalize:
		if out, err = finalizedNamespace(cur, upd); err != nil {
			return nil, err
		}
	default:
		out = upd
		updMeta.SetUID(curMeta.GetUID())
		updMeta.SetCreationTimestamp(curMeta.GetCreationTimestamp())
		updMeta.SetDeletionTimestamp(curMeta.GetDeletionTimestamp())
		updMeta.SetDeletionGracePeriodSeconds(curMeta.GetDeletionGracePeriodSeconds())
		updMeta.SetGeneration(curMeta.GetGeneration())
		updMeta.SetGenerateName(curMeta.GetGenerateName())
		applyDefaults(out)
		bumpGeneration(cur, out)
		if ri.res.hasSubresource(subStatus) {
			setStatus(out, cur)
		}
		keepNamespaceFinalizers(cur, out)
	}
	outMeta, _ := metaOf(out)
	outMeta.SetResourceVersion(curMeta.GetResourceVersion())
	trackUpdate(ctx, ri, cur, out)
	if err := validateUpdate(ri.res, cur, out); err != nil {
		return nil, err
	}
	req := Request{Identity: IdentityFrom(ctx), Verb: verb, Resource: ri.res.gr, Subresource: ri.subresource,
		Namespace: ri.namespace, Name: ri.name, Object: out, Old: cur}
	if pod, ok := cur.(*corev1.Pod); ok && ri.subresource == subStatus && req.Identity == IdentityNodeController {
		if req.Node, err = s.podNode(ctx, pod); err != nil {
			return nil, err
		}
	}
	if err := s.authorize(req); err != nil {
		return nil, err
	}
	if pc, ok := out.(*schedulingv1.PriorityClass); ok {
		if err := s.admitPriorityClass(ctx, pc); err != nil {
			return nil, err
		}
	}
	if apiequality.Semantic.DeepEqual(cur, out) {
		return nil, nil
	}
	return out, nil
}

// podNode returns the stored Node a pod is bound to, or nil when the pod is
// unbound or the node does not exist.
func (s *Server) podNode(ctx context.Context, pod *corev1.Pod) (*corev1.Node, error) {
	return s.nodeNamed(ctx, pod.Spec.NodeName)
}

// nodeNamed returns the stored Node called name, or nil when name is empty
// or no such Node exists.
func (s *Server) nodeNamed(ctx context.Context, name string) (*corev1.Node, error) {
	if name == "" {
		return nil, nil
	}
	stored, err := s.store.Get(ctx, raftstore.Key{Resource: "nodes", Name: name})
	if errors.Is(err, raftstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeError(err, grNodes, name)
	}
	res, _ := s.reg.lookup("", "v1", "nodes")
	obj, err := res.decodeStored(stored.Data)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Node), nil
}

// updateFunc computes the object to write over cur (stored at curRV); it
// returns nil to leave the stored object as it is.
type updateFunc func(cur runtime.Object, curRV uint64) (runtime.Object, error)

// guaranteedUpdate is the read-modify-write loop of every update: read, let
// tryUpdate decide, write with a compare-and-swap on the read
// resourceVersion, and start over (at most MaxConflictRetries times) when
// another writer got in between. It returns the object as stored afterwards.
func (s *Server) guaranteedUpdate(ctx context.Context, res *resourceInfo, key raftstore.Key, tryUpdate updateFunc) (runtime.Object, error) {
	for attempt := 0; ; attempt++ {
		stored, err := s.store.Get(ctx, key)
		if err != nil {
			return nil, storeError(err, res.gr, key.Name)
		}
		cur, err := res.decodeStored(stored.Data)
		if err != nil {
			return nil, err
		}
		upd, err := tryUpdate(cur, stored.RV)
		if err != nil {
			return nil, err
		}
		if upd == nil {
			return cur, nil
		}
		data, err := res.encodeForStore(upd)
		if err != nil {
			return nil, err
		}
		written, err := s.store.Update(ctx, key, data, raftstore.Preconditions{ResourceVersion: stored.RV})
		if errors.Is(err, raftstore.ErrConflict) {
			if attempt < s.cfg.MaxConflictRetries {
				continue
			}
			return nil, apierrors.NewConflict(res.gr, key.Name, fmt.Errorf(
				"gave up after %d concurrent writes got in first: %s", attempt+1, optimisticLockMessage))
		}
		if err != nil {
			return nil, storeError(err, res.gr, key.Name)
		}
		out, err := res.decodeStored(written.Data)
		if err == nil {
			// The write may have removed the last finalizer of an object
			// marked deleted (gc_finalizers.go).
			err = s.finishDeletion(ctx, res, key, out, written.RV)
		}
		return out, err
	}
}
