package apiserver

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Subresource names served by some resources.
const (
	subStatus   = "status"
	subBinding  = "binding"
	subEviction = "eviction"
	subScale    = "scale"
	// The pod subresources of a container's output and process: log is
	// served from Config.Logs; exec, attach and portforward answer that
	// simulated containers run no processes.
	subLog         = "log"
	subExec        = "exec"
	subAttach      = "attach"
	subPortForward = "portforward"
)

// resourceSpec is one row of the registry table: everything the server needs
// to serve a resource generically. Adding a resource is adding a row.
type resourceSpec struct {
	group, version, resource, kind string
	namespaced                     bool
	shortNames                     []string
	// subresources lists the served subresources (subStatus, subBinding, ...).
	subresources []string
	// fields returns the resource-specific field selector fields of an
	// object; metadata.name (and metadata.namespace when namespaced) are
	// always there.
	fields func(runtime.Object) fields.Set
	// fieldNames are the keys fields returns.
	fieldNames []string
	// resetStatusOnCreate clears the status of created objects, as the
	// owning controller (or kubelet) reports it through /status.
	resetStatusOnCreate bool
	// createOnUpdate: a PUT of an object that does not exist creates it,
	// whatever resourceVersion it carries, as kube-apiserver's strategies
	// with AllowCreateOnUpdate do (leases, events and others).
	createOnUpdate bool
}

// resourceTable is every resource the server serves.
var resourceTable = []resourceSpec{
	{group: "", version: "v1", resource: "pods", kind: "Pod", namespaced: true, shortNames: []string{"po"},
		subresources: []string{subStatus, subBinding, subEviction, subLog, subExec, subAttach, subPortForward}, fields: podFields,
		fieldNames: []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
			"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
		resetStatusOnCreate: true},
	{group: "", version: "v1", resource: "nodes", kind: "Node", shortNames: []string{"no"},
		subresources: []string{subStatus}, fields: nodeFields, fieldNames: []string{"spec.unschedulable"}},
	{group: "", version: "v1", resource: "namespaces", kind: "Namespace", shortNames: []string{"ns"},
		subresources: []string{subStatus, subFinalize}, fields: namespaceFields, fieldNames: []string{"status.phase"}},
	{group: "", version: "v1", resource: "events", kind: "Event", namespaced: true, shortNames: []string{"ev"},
		createOnUpdate: true, fields: coreEventFields, fieldNames: []string{"involvedObject.kind", "involvedObject.namespace",
			"involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
			"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}},
	{group: "", version: "v1", resource: "services", kind: "Service", namespaced: true, shortNames: []string{"svc"},
		subresources: []string{subStatus}, resetStatusOnCreate: true,
		fields: serviceFields, fieldNames: []string{"spec.clusterIP", "spec.type"}},
	{group: "coordination.k8s.io", version: "v1", resource: "leases", kind: "Lease", namespaced: true, createOnUpdate: true},
	{group: "scheduling.k8s.io", version: "v1", resource: "priorityclasses", kind: "PriorityClass", shortNames: []string{"pc"}},
	{group: "policy", version: "v1", resource: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true,
		shortNames: []string{"pdb"}, subresources: []string{subStatus}, resetStatusOnCreate: true},
	{group: "apps", version: "v1", resource: "statefulsets", kind: "StatefulSet", namespaced: true,
		shortNames: []string{"sts"}, subresources: []string{subStatus, subScale}, resetStatusOnCreate: true},
	{group: "apps", version: "v1", resource: "deployments", kind: "Deployment", namespaced: true,
		shortNames: []string{"deploy"}, subresources: []string{subStatus, subScale}, resetStatusOnCreate: true},
	{group: "apps", version: "v1", resource: "replicasets", kind: "ReplicaSet", namespaced: true,
		shortNames: []string{"rs"}, subresources: []string{subStatus, subScale}, resetStatusOnCreate: true,
		fields: replicaSetFields, fieldNames: []string{"status.replicas"}},
	{group: "storage.k8s.io", version: "v1", resource: "volumeattachments", kind: "VolumeAttachment",
		subresources: []string{subStatus}, resetStatusOnCreate: true},
	{group: "events.k8s.io", version: "v1", resource: "events", kind: "Event", namespaced: true, shortNames: []string{"ev"},
		createOnUpdate: true, fields: eventsV1Fields, fieldNames: []string{"regarding.kind", "regarding.namespace", "regarding.name",
			"regarding.uid", "reason", "reportingController", "type"}},
}

// resourceInfo is a registry row resolved against the scheme.
type resourceInfo struct {
	resourceSpec
	gvk      schema.GroupVersionKind
	listGVK  schema.GroupVersionKind
	gr       schema.GroupResource
	storeKey string // raftstore Key.Resource
	verbs    []string
}

// apiVersion renders the resource's group/version as apiVersion spells it.
func (r *resourceInfo) apiVersion() string { return r.gvk.GroupVersion().String() }

// newObject returns an empty typed object of the resource.
func (r *resourceInfo) newObject() runtime.Object {
	obj, err := apiScheme.New(r.gvk)
	if err != nil {
		// New only fails for unregistered kinds, and newRegistry checked them.
		panic(fmt.Sprintf("apiserver: %v", err))
	}
	return obj
}

// hasSubresource reports whether the resource serves sub.
func (r *resourceInfo) hasSubresource(sub string) bool {
	for _, s := range r.subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// fieldSet returns every field selector field of obj.
func (r *resourceInfo) fieldSet(obj runtime.Object) fields.Set {
	set := fields.Set{}
	if r.fields != nil {
		set = r.fields(obj)
	}
	if m, err := metaOf(obj); err == nil {
		set["metadata.name"] = m.GetName()
		if r.namespaced {
			set["metadata.namespace"] = m.GetNamespace()
		}
	}
	return set
}

// supportedFields lists the field selector fields of the resource.
func (r *resourceInfo) supportedFields() []string {
	out := []string{"metadata.name"}
	if r.namespaced {
		out = append(out, "metadata.namespace")
	}
	return append(out, r.fieldNames...)
}

// registry indexes the resource table and the review table for routing
// and discovery.
type registry struct {
	byGVR    map[schema.GroupVersionResource]*resourceInfo
	byGV     map[schema.GroupVersion][]*resourceInfo
	groups   []string // API groups other than core, sorted
	versions map[string][]string
	// reviews are the create-only reviews (review.go), by group version
	// in table order; they are neither stored nor in byGV.
	reviews map[schema.GroupVersion][]*reviewSpec
}

// newRegistry resolves the table against the scheme.
func newRegistry(table []resourceSpec) (*registry, error) {
	reg := &registry{
		byGVR:    map[schema.GroupVersionResource]*resourceInfo{},
		byGV:     map[schema.GroupVersion][]*resourceInfo{},
		versions: map[string][]string{},
	}
	for _, spec := range table {
		gvr := schema.GroupVersionResource{Group: spec.group, Version: spec.version, Resource: spec.resource}
		gvk := gvr.GroupVersion().WithKind(spec.kind)
		listGVK := gvr.GroupVersion().WithKind(spec.kind + "List")
		for _, k := range []schema.GroupVersionKind{gvk, listGVK} {
			if !apiScheme.Recognizes(k) {
				return nil, fmt.Errorf("registry: %s is not a registered kind", k)
			}
		}
		if _, dup := reg.byGVR[gvr]; dup {
			return nil, fmt.Errorf("registry: %s listed twice", gvr)
		}
		info := &resourceInfo{
			resourceSpec: spec, gvk: gvk, listGVK: listGVK,
			gr:       gvr.GroupResource(),
			storeKey: storeResource(gvr.GroupResource()),
			verbs:    []string{VerbCreate, VerbDelete, VerbDeleteCollection, VerbGet, VerbList, VerbPatch, VerbUpdate, VerbWatch},
		}
		reg.byGVR[gvr] = info
		gv := gvr.GroupVersion()
		if len(reg.byGV[gv]) == 0 {
			reg.versions[spec.group] = append(reg.versions[spec.group], spec.version)
			if spec.group != "" {
				reg.groups = append(reg.groups, spec.group)
			}
		}
		reg.byGV[gv] = append(reg.byGV[gv], info)
	}
	sort.Strings(reg.groups)
	return reg, nil
}

// addReviews adds the reviews of table to the registry, their groups and
// versions to discovery's.
func (reg *registry) addReviews(table []reviewSpec) error {
	reg.reviews = map[schema.GroupVersion][]*reviewSpec{}
	for i := range table {
		spec := &table[i]
		gv := schema.GroupVersion{Group: spec.group, Version: spec.version}
		if !apiScheme.Recognizes(gv.WithKind(spec.kind)) {
			return fmt.Errorf("registry: %s is not a registered kind", gv.WithKind(spec.kind))
		}
		if _, dup := reg.byGVR[gv.WithResource(spec.resource)]; dup || reg.review(spec.group, spec.version, spec.resource) != nil {
			return fmt.Errorf("registry: %s listed twice", gv.WithResource(spec.resource))
		}
		if len(reg.byGV[gv]) == 0 && len(reg.reviews[gv]) == 0 {
			reg.versions[spec.group] = append(reg.versions[spec.group], spec.version)
			if spec.group != "" && !slices.Contains(reg.groups, spec.group) {
				reg.groups = append(reg.groups, spec.group)
			}
		}
		reg.reviews[gv] = append(reg.reviews[gv], spec)
	}
	sort.Strings(reg.groups)
	return nil
}

// review returns the review served at group/version/resource, or nil.
func (reg *registry) review(group, version, resource string) *reviewSpec {
	for _, r := range reg.reviews[schema.GroupVersion{Group: group, Version: version}] {
		if r.resource == resource {
			return r
		}
	}
	return nil
}

// reviewGR returns the review gr at any version, or nil.
func (reg *registry) reviewGR(gr schema.GroupResource) *reviewSpec {
	for _, v := range reg.versions[gr.Group] {
		if rev := reg.review(gr.Group, v, gr.Resource); rev != nil {
			return rev
		}
	}
	return nil
}

// lookupGR returns the resource gr at its first served version, for
// questions that name no version (access reviews).
func (reg *registry) lookupGR(gr schema.GroupResource) (*resourceInfo, bool) {
	for _, v := range reg.versions[gr.Group] {
		if info, ok := reg.lookup(gr.Group, v, gr.Resource); ok {
			return info, true
		}
	}
	return nil, false
}

// resources returns every served resource, in table order by group version.
func (reg *registry) resources() []*resourceInfo {
	var out []*resourceInfo
	for _, g := range append([]string{""}, reg.groups...) {
		for _, v := range reg.versions[g] {
			out = append(out, reg.byGV[schema.GroupVersion{Group: g, Version: v}]...)
		}
	}
	return out
}

// lookup returns the resource served at group/version/resource.
func (reg *registry) lookup(group, version, resource string) (*resourceInfo, bool) {
	info, ok := reg.byGVR[schema.GroupVersionResource{Group: group, Version: version, Resource: resource}]
	return info, ok
}

// storeResource is the raftstore Key.Resource of a resource: the plural for
// core resources and "plural.group" otherwise.
func storeResource(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

func podFields(obj runtime.Object) fields.Set {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

func nodeFields(obj runtime.Object) fields.Set {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
}

func namespaceFields(obj runtime.Object) fields.Set {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"status.phase": string(n.Status.Phase)}
}

func serviceFields(obj runtime.Object) fields.Set {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
}

func replicaSetFields(obj runtime.Object) fields.Set {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
}

func coreEventFields(obj runtime.Object) fields.Set {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return fields.Set{}
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

func eventsV1Fields(obj runtime.Object) fields.Set {
	e, ok := obj.(*eventsv1.Event)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{
		"regarding.kind":      e.Regarding.Kind,
		"regarding.namespace": e.Regarding.Namespace,
		"regarding.name":      e.Regarding.Name,
		"regarding.uid":       string(e.Regarding.UID),
		"reason":              e.Reason,
		"reportingController": e.ReportingController,
		"type":                e.Type,
	}
}

// singular is the singular resource name discovery reports: the lower-cased kind.
func (r *resourceInfo) singular() string { return strings.ToLower(r.kind) }
