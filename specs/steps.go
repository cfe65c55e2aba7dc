package specs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/target"
)

// Step is one step of a scripted run (Scenario.Steps): what an operator or
// the environment does, in order, instead of the workload's random
// operations and the nemesis's random faults. A reproduction of an upstream
// bug is a scripted run (see the repro directory).
type Step struct {
	// Do is the action:
	//
	//	statefulset   create StatefulSet Name (Replicas pets, no volumes) in Namespace
	//	wait-running  wait until pod Pod runs on Node (with NewUID: a UID other than the one it had when first waited for)
	//	cordon        mark Node unschedulable (uncordon: schedulable again)
	//	force-delete  delete pod Pod with grace 0, as an operator does for a dead node
	//	power-off     cut Node's power (power-on: restore it; its kubelet starts again)
	//	cut-api-store cut API server APIServer from every etcd member (its watch cache stops); heal ends every cut
	//	sleep         wait For
	//	create        create every object of Manifest (YAML documents of any kind the API serves; namespaced ones
	//	              without a namespace in Namespace), as kubectl create -f does
	//	freeze-watch  freeze the watches of Resource (plural: "leases") by Component ("kube-controller-manager-0",
	//	              which must run behind a watch front: kube.watchFronts); heal ends it
	//	patch         merge-patch Object ("TYPE/NAME", in Namespace when namespaced) with Patch (JSON or YAML), as
	//	              kubectl patch --type merge does
	//	wait          wait until Object ("TYPE/NAME", in Namespace when namespaced) meets Until: "delete",
	//	              "condition=TYPE[=STATUS]" or "jsonpath={.path}=value", as kubectl wait --for does
	Do         string   `json:"do"`
	Name       string   `json:"name,omitempty"`
	Namespace  string   `json:"namespace,omitempty"`
	Replicas   int32    `json:"replicas,omitempty"`
	Pod        string   `json:"pod,omitempty"`
	Node       string   `json:"node,omitempty"`
	NewUID     bool     `json:"newUID,omitempty"`
	APIServer  int      `json:"apiserver,omitempty"`
	For        Duration `json:"for,omitempty"`
	TimeoutFor Duration `json:"timeout,omitempty"`
	Manifest   string   `json:"manifest,omitempty"`
	Object     string   `json:"object,omitempty"`
	Until      string   `json:"until,omitempty"`
	Patch      string   `json:"patch,omitempty"`
	Component  string   `json:"component,omitempty"`
	Resource   string   `json:"resource,omitempty"`
}

// stepActions are the Step.Do values.
var stepActions = []string{"statefulset", "wait-running", "cordon", "uncordon", "force-delete", "power-off", "power-on", "cut-api-store", "heal", "sleep", "create", "wait", "patch", "freeze-watch"}

// ErrInvalidStep: a scripted run's step is malformed.
var ErrInvalidStep = errors.New("invalid step")

// validate reports the first problem with step i, naming its field.
func (s Step) validate(i int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %d (%s): %s", ErrInvalidStep, i+1, s.Do, fmt.Sprintf(format, args...))
	}
	switch s.Do {
	case "statefulset":
		if s.Name == "" || s.Replicas < 1 {
			return bad("needs name and replicas ≥ 1")
		}
	case "wait-running", "force-delete":
		if s.Pod == "" {
			return bad("needs pod")
		}
	case "cordon", "uncordon", "power-off", "power-on":
		if s.Node == "" {
			return bad("needs node")
		}
	case "cut-api-store":
		if s.APIServer < 0 {
			return bad("apiserver must not be negative")
		}
	case "sleep":
		if s.For <= 0 {
			return bad("needs for > 0")
		}
	case "create":
		if _, err := parseManifest(s.Manifest); err != nil {
			return bad("manifest: %v", err)
		}
	case "wait":
		if _, _, err := splitObjectRef(s.Object); err != nil {
			return bad("%v", err)
		}
		if _, err := parseWaitCondition(s.Until); err != nil {
			return bad("%v", err)
		}
	case "patch":
		if _, _, err := splitObjectRef(s.Object); err != nil {
			return bad("%v", err)
		}
		if _, err := patchJSON(s.Patch); err != nil {
			return bad("patch: %v", err)
		}
	case "freeze-watch":
		if s.Component == "" || s.Resource == "" {
			return bad("needs component and resource")
		}
	case "heal":
	default:
		return fmt.Errorf("%w %d: do %q: choose one of %s", ErrInvalidStep, i+1, s.Do, strings.Join(stepActions, ", "))
	}
	return nil
}

// stepNamespace is where scripted pods live unless a step names another.
const stepNamespace = "podsafe-steps"

// stepRunner runs a scripted run's steps against a system.
type stepRunner struct {
	t     target.Target
	admin kubernetes.Interface
	rec   *history.Recorder
	// uids are the UIDs each pod had when first waited for.
	uids  map[string]types.UID
	heals []func() error
	ids   uint64
	// objects serves the create and wait steps.
	objects objects
}

// runSteps runs steps in order; the first that fails ends the run (after
// healing what was cut). Every step is logged in the history; cuts and
// power-offs are recorded as fault intervals.
func runSteps(ctx context.Context, steps []Step, t target.Target, admin kubernetes.Interface, adminCfg *rest.Config, rec *history.Recorder) (err error) {
	r := &stepRunner{t: t, admin: admin, rec: rec, uids: map[string]types.UID{}, objects: objects{cfg: adminCfg}}
	defer func() {
		if herr := r.heal(); herr != nil {
			err = errors.Join(err, herr)
		}
	}()
	for i, s := range steps {
		rec.Log("step", map[string]string{"n": strconv.Itoa(i + 1), "do": s.Do, "step": fmt.Sprintf("%+v", s)})
		if err := r.run(ctx, s); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.Do, err)
		}
	}
	return nil
}

func (r *stepRunner) ns(s Step) string {
	if s.Namespace != "" {
		return s.Namespace
	}
	return stepNamespace
}

func (r *stepRunner) run(ctx context.Context, s Step) error {
	switch s.Do {
	case "statefulset":
		return r.statefulSet(ctx, s)
	case "wait-running":
		return r.waitRunning(ctx, s)
	case "cordon", "uncordon":
		return r.cordon(ctx, s.Node, s.Do == "cordon")
	case "force-delete":
		return r.admin.CoreV1().Pods(r.ns(s)).Delete(ctx, s.Pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	case "power-off", "power-on":
		ps, ok := r.t.(target.PowerSwitch)
		if !ok {
			return fmt.Errorf("the target cannot power nodes: %w", target.ErrUnsupported)
		}
		r.ids++
		ev := history.NemesisEvent{ID: r.ids, Name: "power-off", Description: "step: power off " + s.Node,
			Components: []string{s.Node}, Params: map[string]string{"node": s.Node}}
		if s.Do == "power-on" {
			ev.Name, ev.Description = "power-on", "step: power on "+s.Node
		}
		ev.Phase = history.PhaseStart
		r.rec.Nemesis(ev)
		var err error
		if s.Do == "power-off" {
			err = ps.PowerOff(ctx, s.Node)
		} else {
			err = ps.PowerOn(ctx, s.Node)
		}
		ev.Phase = history.PhaseEnd
		r.rec.Nemesis(ev)
		return err
	case "cut-api-store":
		as, ok := r.t.(target.APIStore)
		if !ok {
			return fmt.Errorf("the target cannot cut an API server from its store: %w", target.ErrUnsupported)
		}
		links := as.APIStoreLinks(s.APIServer)
		if len(links) == 0 {
			return fmt.Errorf("no API server %d", s.APIServer)
		}
		net, ok := r.t.(target.Networker)
		if !ok {
			return fmt.Errorf("the target cannot cut links: %w", target.ErrUnsupported)
		}
		heal, err := net.Cut(ctx, links)
		if err != nil {
			return err
		}
		r.fault(history.NemesisEvent{Name: "api-store", Description: fmt.Sprintf("step: cut API server %d from the store", s.APIServer),
			Links: links, Params: map[string]string{"member": strconv.Itoa(s.APIServer)}}, heal)
		return nil
	case "create":
		return r.create(ctx, s)
	case "patch":
		return r.patch(ctx, s)
	case "freeze-watch":
		wf, ok := r.t.(target.WatchFreezer)
		if !ok {
			return fmt.Errorf("the target cannot freeze watches: %w", target.ErrUnsupported)
		}
		heal, err := wf.FreezeWatch(ctx, s.Component, s.Resource)
		if err != nil {
			return err
		}
		r.fault(history.NemesisEvent{Name: "freeze-watch", Description: fmt.Sprintf("step: freeze %s's watches of %s", s.Component, s.Resource),
			Components: []string{s.Component}, Params: map[string]string{"component": s.Component, "resource": s.Resource}}, heal)
		return nil
	case "wait":
		return r.wait(ctx, s)
	case "heal":
		return r.heal()
	case "sleep":
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(s.For)):
			return nil
		}
	}
	return fmt.Errorf("%w: do %q", ErrInvalidStep, s.Do)
}

// fault records the start of a fault a step put in place and keeps its
// heal, which records its end.
func (r *stepRunner) fault(ev history.NemesisEvent, heal func() error) {
	r.ids++
	ev.ID, ev.Phase = r.ids, history.PhaseStart
	r.rec.Nemesis(ev)
	r.heals = append(r.heals, func() error {
		err := heal()
		ev.Phase = history.PhaseEnd
		r.rec.Nemesis(ev)
		return err
	})
}

// heal ends every cut still in place, in reverse order.
func (r *stepRunner) heal() error {
	var errs []error
	for i := len(r.heals) - 1; i >= 0; i-- {
		errs = append(errs, r.heals[i]())
	}
	r.heals = nil
	return errors.Join(errs...)
}

// statefulSet creates the namespace if needed and a StatefulSet of pets
// without volumes that run until stopped.
func (r *stepRunner) statefulSet(ctx context.Context, s Step) error {
	ns := r.ns(s)
	if err := r.ensureNamespace(ctx, s, ns); err != nil {
		return err
	}
	labels := map[string]string{"app": s.Name}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(s.Replicas), ServiceName: s.Name,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "podsafe.io/sim:1"}},
					TerminationGracePeriodSeconds: ptr.To[int64](5)},
			},
		},
	}
	_, err := r.admin.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{})
	return err
}

// ensureNamespace creates namespace ns unless it exists, and waits for
// its default ServiceAccount: kube-apiserver's ServiceAccount admission
// refuses pods until it exists.
func (r *stepRunner) ensureNamespace(ctx context.Context, s Step, ns string) error {
	_, err := r.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := r.poll(ctx, s, func() (bool, error) {
		_, err := r.admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns, err)
	}
	return nil
}

// waitRunning waits until the pod runs on the node (with NewUID, as a new
// incarnation).
func (r *stepRunner) waitRunning(ctx context.Context, s Step) error {
	key := r.ns(s) + "/" + s.Pod
	return r.poll(ctx, s, func() (bool, error) {
		p, err := r.admin.CoreV1().Pods(r.ns(s)).Get(ctx, s.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil // the API may be cut off for a while
		}
		if s.NewUID && p.UID == r.uids[key] {
			return false, nil
		}
		if s.Node != "" && p.Spec.NodeName != s.Node {
			return false, nil
		}
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false, nil
		}
		if _, ok := r.uids[key]; !ok {
			r.uids[key] = p.UID
		}
		return true, nil
	})
}

// cordon marks node unschedulable, or schedulable again.
func (r *stepRunner) cordon(ctx context.Context, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := r.admin.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// poll calls done every 200 ms until it says so, ctx ends or the step's
// timeout (default 2 min) passes.
func (r *stepRunner) poll(ctx context.Context, s Step, done func() (bool, error)) error {
	timeout := time.Duration(s.TimeoutFor)
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done within %s: %w", timeout, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
