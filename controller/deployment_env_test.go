package controller

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// depEnv runs a deployment controller against a fake API and plays the
// ReplicaSet controller and the kubelets itself, one step at a time, so a
// test sees every state a rollout passes through.
type depEnv struct {
	t   *testing.T
	ctx context.Context
	cs  *fake.Clientset
	dc  *Deployment
	clk *clocktesting.FakeClock
	uid int
}

// newDepEnv starts the controller's informers on a fake API holding objs;
// created objects get a UID, as the API server gives them one.
func newDepEnv(t *testing.T, objs ...runtime.Object) *depEnv {
	t.Helper()
	e := &depEnv{t: t, cs: fake.NewClientset(objs...), clk: clocktesting.NewFakeClock(time.Unix(10000, 0))}
	e.cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, err := metaOf(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetUID() == "" {
			e.uid++
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", e.uid)))
			if m.GetName() == "" {
				m.SetName(fmt.Sprintf("%s%d", m.GetGenerateName(), e.uid))
			}
			m.SetCreationTimestamp(metav1.NewTime(e.clk.Now().Add(time.Duration(e.uid) * time.Millisecond)))
		}
		return false, nil, nil
	})
	dc, err := NewDeployment(DeploymentConfig{Client: e.cs, Clock: e.clk})
	if err != nil {
		t.Fatal(err)
	}
	e.dc = dc
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	dc.factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		dc.factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), dc.synced...) {
		t.Fatal("caches did not sync")
	}
	return e
}

// metaOf is meta.Accessor for the objects tests create.
func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// makeDeployment is a Deployment "web" of replicas pods of image, defaulted
// as the API server would.
func makeDeployment(replicas int32, image string, surge, unavailable int) *appsv1.Deployment {
	s, u := intstr.FromInt32(int32(surge)), intstr.FromInt32(int32(unavailable))
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: image}}},
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// deployment reads web from the API.
func (e *depEnv) deployment() *appsv1.Deployment {
	e.t.Helper()
	d, err := e.cs.AppsV1().Deployments("default").Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// update writes web after edit, bumping its generation when the spec
// changed, as the API server does.
func (e *depEnv) update(edit func(*appsv1.Deployment)) {
	e.t.Helper()
	d := e.deployment()
	before := d.Spec.DeepCopy()
	edit(d)
	if !apiequality.Semantic.DeepEqual(*before, d.Spec) {
		d.Generation++
	}
	if _, err := e.cs.AppsV1().Deployments("default").Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.settle()
}

// sync runs one sync of web once the caches show every write.
func (e *depEnv) sync() error {
	e.t.Helper()
	e.settle()
	err := e.dc.sync(e.ctx, "default/web")
	e.settle()
	return err
}

// mustSync is sync failing the test on an error.
func (e *depEnv) mustSync() {
	e.t.Helper()
	if err := e.sync(); err != nil {
		e.t.Fatal(err)
	}
}

// sets lists the ReplicaSets in the API, oldest first.
func (e *depEnv) sets() []*appsv1.ReplicaSet {
	e.t.Helper()
	l, err := e.cs.AppsV1().ReplicaSets("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	byCreation(out)
	return out
}

// pods lists the pods in the API.
func (e *depEnv) pods() []*corev1.Pod {
	e.t.Helper()
	l, err := e.cs.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out
}

// replicate plays the ReplicaSet controller: each set gets as many active
// pods as it asks for, not ready; extra ones begin terminating (the newest
// first), and linger until finishTerminations.
func (e *depEnv) replicate() {
	e.t.Helper()
	pods := e.pods()
	for _, rs := range e.sets() {
		var active []*corev1.Pod
		for _, p := range pods {
			if ownedBy(p, rs.UID) && podActive(p) {
				active = append(active, p)
			}
		}
		want := int(specReplicas(rs))
		for i := len(active); i < want; i++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: rs.Name + "-", Namespace: "default",
				Labels:          rs.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
				Spec: rs.Spec.Template.Spec}
			if _, err := e.cs.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}
		sort.Slice(active, func(i, j int) bool { return active[i].Name > active[j].Name })
		for i := 0; i < len(active)-want; i++ {
			p := active[i].DeepCopy()
			p.DeletionTimestamp = ptr.To(metav1.NewTime(e.clk.Now()))
			if _, err := e.cs.CoreV1().Pods("default").Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	e.settle()
}

// finishTerminations removes every terminating pod.
func (e *depEnv) finishTerminations() {
	e.t.Helper()
	for _, p := range e.pods() {
		if p.DeletionTimestamp != nil {
			if err := e.cs.CoreV1().Pods("default").Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	e.settle()
}

// makeReady marks every active pod Ready from now on.
func (e *depEnv) makeReady() {
	e.t.Helper()
	for _, p := range e.pods() {
		if !podActive(p) || podReady(p) {
			continue
		}
		p = p.DeepCopy()
		p.Spec.NodeName = "node-1"
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(e.clk.Now())}}
		if _, err := e.cs.CoreV1().Pods("default").UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.settle()
}

// settle waits until the controller's caches hold what the API holds.
func (e *depEnv) settle() {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if e.cachesCurrent() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatal("the controller's caches did not catch up with the API")
}

// cachesCurrent compares the listers with the API.
func (e *depEnv) cachesCurrent() bool {
	rsl, _ := e.cs.AppsV1().ReplicaSets("default").List(e.ctx, metav1.ListOptions{})
	cached, _ := e.dc.sets.ReplicaSets("default").List(labels.Everything())
	if len(rsl.Items) != len(cached) {
		return false
	}
	for _, c := range cached {
		if !slicesContainEqual(rsl.Items, c) {
			return false
		}
	}
	pl, _ := e.cs.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
	cp, _ := e.dc.pods.Pods("default").List(labels.Everything())
	if len(pl.Items) != len(cp) {
		return false
	}
	for _, c := range cp {
		found := false
		for i := range pl.Items {
			found = found || apiequality.Semantic.DeepEqual(&pl.Items[i], c)
		}
		if !found {
			return false
		}
	}
	d, err := e.cs.AppsV1().Deployments("default").Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		return true
	}
	cd, err := e.dc.deps.Deployments("default").Get("web")
	return err == nil && apiequality.Semantic.DeepEqual(d, cd)
}

func slicesContainEqual(items []appsv1.ReplicaSet, rs *appsv1.ReplicaSet) bool {
	for i := range items {
		if apiequality.Semantic.DeepEqual(&items[i], rs) {
			return true
		}
	}
	return false
}

// podCounts counts the active pods and the ready ones among them.
func (e *depEnv) podCounts() (active, ready int) {
	for _, p := range e.pods() {
		if podActive(p) {
			active++
			if podReady(p) {
				ready++
			}
		}
	}
	return active, ready
}

// setSizes renders each set as name-suffix=replicas, oldest first, by
// revision: "1=3 2=2".
func (e *depEnv) setSizes() string {
	var s string
	for _, rs := range e.sets() {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%s=%d", rs.Annotations[RevisionAnnotation], specReplicas(rs))
	}
	return s
}
