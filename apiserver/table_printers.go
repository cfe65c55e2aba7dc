package apiserver

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// A tablePrinter is the server-side printer of one kind: kube-apiserver's
// columns for it (pkg/printers/internalversion in k8s.io/kubernetes) and
// the cells of one object's row. Rows always carry every column, the
// priority 1 ones too, as kube-apiserver's printers are called with Wide
// set; kubectl hides priority 1 columns unless -o wide. cells is pure; now
// is the instant ages are measured from.
type tablePrinter struct {
	columns []metav1.TableColumnDefinition
	cells   func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition)
}

// Descriptions kube-apiserver's columns take from the API's swagger docs.
var (
	metaDoc = metav1.ObjectMeta{}.SwaggerDoc()
	nameDoc = metaDoc["name"]
	ageDoc  = metaDoc["creationTimestamp"]
)

const (
	containersDoc = "Names of each container in the template."
	imagesDoc     = "Images referenced by each container in the template."
)

// Node role labels, as kubectl and kube-apiserver read them.
const (
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
	nodeRoleLabel       = "kubernetes.io/role"
	// nodeLostReason is the pod status reason of the node lifecycle
	// controller for a pod whose node is unreachable.
	nodeLostReason = "NodeLost"
)

// tablePrinters are the printers by kind; a kind without one gets
// defaultTablePrinter, as kube-apiserver's default table convertor.
var tablePrinters = map[schema.GroupKind]tablePrinter{
	{Kind: "Pod"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		{Name: "Age", Type: "string", Description: ageDoc},
		{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
	}, cells: podCells},
	{Kind: "Node"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		{Name: "Age", Type: "string", Description: ageDoc},
		{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
	}, cells: nodeCells},
	{Kind: "Namespace"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		{Name: "Age", Type: "string", Description: ageDoc},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		ns := obj.(*corev1.Namespace)
		return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}, nil
	}},
	{Kind: "Event"}: {columns: eventColumns, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		return eventCells(obj.(*corev1.Event), now), nil
	}},
	// events.k8s.io serves the core Events' storage, and kube-apiserver
	// prints both through the core printer.
	{Group: "events.k8s.io", Kind: "Event"}: {columns: eventColumns, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		return eventCells(coreEvent(obj.(*eventsv1.Event)), now), nil
	}},
	{Kind: "Service"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
		{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
		{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
		{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
		{Name: "Age", Type: "string", Description: ageDoc},
		{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]},
	}, cells: serviceCells},
	{Group: "coordination.k8s.io", Kind: "Lease"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		{Name: "Age", Type: "string", Description: ageDoc},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		l := obj.(*coordinationv1.Lease)
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return []any{l.Name, holder, age(l.CreationTimestamp, now)}, nil
	}},
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Value", Type: "integer", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["value"]},
		{Name: "Global-Default", Type: "boolean", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]},
		{Name: "Age", Type: "string", Description: ageDoc},
		{Name: "PreemptionPolicy", Type: "string", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		pc := obj.(*schedulingv1.PriorityClass)
		policy := ""
		if pc.PreemptionPolicy != nil {
			policy = string(*pc.PreemptionPolicy)
		}
		return []any{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp, now), policy}, nil
	}},
	{Group: "policy", Kind: "PodDisruptionBudget"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
		{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
		{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
		{Name: "Age", Type: "string", Description: ageDoc},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		pdb := obj.(*policyv1.PodDisruptionBudget)
		minAvailable, maxUnavailable := "N/A", "N/A"
		if pdb.Spec.MinAvailable != nil {
			minAvailable = pdb.Spec.MinAvailable.String()
		}
		if pdb.Spec.MaxUnavailable != nil {
			maxUnavailable = pdb.Spec.MaxUnavailable.String()
		}
		return []any{pdb.Name, minAvailable, maxUnavailable, int64(pdb.Status.DisruptionsAllowed), age(pdb.CreationTimestamp, now)}, nil
	}},
	{Group: "apps", Kind: "StatefulSet"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Age", Type: "string", Description: ageDoc},
		{Name: "Containers", Type: "string", Priority: 1, Description: containersDoc},
		{Name: "Images", Type: "string", Priority: 1, Description: imagesDoc},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		sts := obj.(*appsv1.StatefulSet)
		// The internal type kube-apiserver prints defaults replicas to 1
		// when unset; the stored object has it defaulted already.
		desired := int32(1)
		if sts.Spec.Replicas != nil {
			desired = *sts.Spec.Replicas
		}
		names, images := containerCells(sts.Spec.Template.Spec.Containers)
		return []any{sts.Name, fmt.Sprintf("%d/%d", sts.Status.ReadyReplicas, desired), age(sts.CreationTimestamp, now), names, images}, nil
	}},
	{Group: "apps", Kind: "Deployment"}: deploymentPrinter,
	{Group: "apps", Kind: "ReplicaSet"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
		{Name: "Age", Type: "string", Description: ageDoc},
		{Name: "Containers", Type: "string", Priority: 1, Description: containersDoc},
		{Name: "Images", Type: "string", Priority: 1, Description: imagesDoc},
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		rs := obj.(*appsv1.ReplicaSet)
		desired := int32(1)
		if rs.Spec.Replicas != nil {
			desired = *rs.Spec.Replicas
		}
		names, images := containerCells(rs.Spec.Template.Spec.Containers)
		return []any{rs.Name, int64(desired), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), age(rs.CreationTimestamp, now),
			names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}, nil
	}},
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}: {columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
		{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
		{Name: "Node", Type: "string", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
		{Name: "Age", Type: "string", Description: ageDoc},
	}, cells: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		va := obj.(*storagev1.VolumeAttachment)
		pv := ""
		if va.Spec.Source.PersistentVolumeName != nil {
			pv = *va.Spec.Source.PersistentVolumeName
		}
		return []any{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp, now)}, nil
	}},
}

// defaultTablePrinter is kube-apiserver's table for a resource without a
// printer (its default table convertor): the name and the creation time
// as an RFC 3339 date, which kubectl shows as NAME and CREATED AT.
var defaultTablePrinter = tablePrinter{
	columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
		{Name: "Created At", Type: "date", Description: ageDoc},
	},
	cells: func(obj runtime.Object, _ time.Time) ([]any, []metav1.TableRowCondition) {
		m, err := metaOf(obj)
		if err != nil {
			return []any{"", ""}, nil
		}
		return []any{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil
	},
}

// printerFor returns the printer of a kind.
func printerFor(gk schema.GroupKind) tablePrinter {
	if p, ok := tablePrinters[gk]; ok {
		return p
	}
	return defaultTablePrinter
}

// age is the AGE cell: how long before now t was, as kubectl rounds it.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// microAge is age for a MicroTime.
func microAge(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// containerCells joins the names and the images of containers.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// nodeCells computes a node's row: STATUS is Ready, NotReady or Unknown
// (no Ready condition), with SchedulingDisabled when cordoned.
func nodeCells(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
	node := obj.(*corev1.Node)
	var status []string
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			status = []string{string(c.Type)}
		} else {
			status = []string{"Not" + string(c.Type)}
		}
	}
	if len(status) == 0 {
		status = []string{"Unknown"}
	}
	if node.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}

	roleSet := map[string]bool{}
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, nodeRoleLabelPrefix):
			if role := strings.TrimPrefix(k, nodeRoleLabelPrefix); role != "" {
				roleSet[role] = true
			}
		case k == nodeRoleLabel && v != "":
			roleSet[v] = true
		}
	}
	roles := make([]string, 0, len(roleSet))
	for r := range roleSet {
		roles = append(roles, r)
	}
	sort.Strings(roles)

	info := node.Status.NodeInfo
	osImage, kernel, runtimeVersion := info.OSImage, info.KernelVersion, info.ContainerRuntimeVersion
	if osImage == "" {
		osImage = "<unknown>"
	}
	if kernel == "" {
		kernel = "<unknown>"
	}
	if runtimeVersion == "" {
		runtimeVersion = "<unknown>"
	}
	if info.Architecture != "" {
		kernel += " (" + info.Architecture + ")"
	}
	return []any{node.Name, strings.Join(status, ","), orNone(strings.Join(roles, ",")), age(node.CreationTimestamp, now), info.KubeletVersion,
		nodeAddress(node, corev1.NodeInternalIP), nodeAddress(node, corev1.NodeExternalIP), osImage, kernel, runtimeVersion}, nil
}

// nodeAddress is the node's first address of type t, or <none>.
func nodeAddress(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// serviceCells computes a service's row.
func serviceCells(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
	svc := obj.(*corev1.Service)
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	ports := make([]string, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		ports[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	portCell := strings.Join(ports, ",")
	if portCell == "" {
		portCell = "<none>"
	}
	return []any{svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), portCell, age(svc.CreationTimestamp, now),
		labels.FormatLabels(svc.Spec.Selector)}, nil
}

// serviceExternalIP is the EXTERNAL-IP cell as the wide printer has it
// (load balancer addresses are not shortened).
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		seen := map[string]bool{}
		var lb []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			addr := in.IP
			if addr == "" {
				addr = in.Hostname
			}
			if addr != "" && !seen[addr] {
				seen[addr] = true
				lb = append(lb, addr)
			}
		}
		sort.Strings(lb)
		all := append(lb, svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// eventColumns are the columns of both Event kinds.
var eventColumns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: nameDoc},
}

// eventCells computes an event's row (every column, as the wide printer).
func eventCells(e *corev1.Event, now time.Time) []any {
	first := age(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		first = microAge(e.EventTime, now)
	}
	last := age(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	switch {
	case e.Series != nil:
		last = microAge(e.Series.LastObservedTime, now)
		count = e.Series.Count
	case count == 0:
		count = 1 // a singleton event of the events.k8s.io API
	}
	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}
	component := cmpOr(e.Source.Component, e.ReportingController)
	source := component
	if instance := cmpOr(e.Source.Host, e.ReportingInstance); instance != "" {
		source = component + ", " + instance
	}
	return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message),
		first, int64(count), e.Name}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// coreEvent is an events.k8s.io Event in the core Event's shape, as
// kube-apiserver converts it before printing.
func coreEvent(e *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          e.ObjectMeta,
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}
