package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
)

const ctlScale = 200

// ctlEnv is a cluster with kubelets, scheduler and controllers whose
// controller clients are recorded twice: into a history file, and into a
// deletion audit that keeps each pod DELETE's grace period.
type ctlEnv struct {
	c      *cluster.Cluster
	cs     kubernetes.Interface // admin
	ledger *kubelet.MemoryLedger
	audit  *ctlDeleteAudit
	rec    *history.Recorder
}

func startCtlCluster(t *testing.T, nodes int, opts ...func(*cluster.Config)) *ctlEnv {
	t.Helper()
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), history.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	audit := &ctlDeleteAudit{}
	env := &ctlEnv{ledger: &kubelet.MemoryLedger{}, audit: audit, rec: rec}
	cfg := cluster.Config{
		Topology: cluster.DefaultTopology(1, nodes, 1), TimeScale: ctlScale,
		Kubelets: true, Scheduler: true, Controllers: true, Ledger: env.ledger,
		WrapTransport: func(identity string) func(http.RoundTripper) http.RoundTripper {
			return func(rt http.RoundTripper) http.RoundTripper {
				return rec.WrapTransport(identity)(audit.wrap(identity, rt))
			}
		},
	}
	// The cluster's log goes to a file that a failing test names.
	logPath := filepath.Join(os.TempDir(), "podsafe-"+strings.ReplaceAll(t.Name(), "/", "_")+".log")
	if lf, err := os.Create(logPath); err == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		t.Cleanup(func() {
			lf.Close()
			if t.Failed() {
				t.Logf("cluster log: %s", logPath)
			} else {
				os.Remove(logPath)
			}
		})
	}
	for _, o := range opts {
		o(&cfg)
	}
	env.c = cluster.StartForTest(t, cfg)
	env.cs, err = env.c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// ctlDeleteAudit records every pod DELETE with its grace period.
type ctlDeleteAudit struct {
	mu      sync.Mutex
	deletes []ctlPodDelete
}

type ctlPodDelete struct {
	Identity, Namespace, Name string
	Grace                     *int64
	Code                      int
}

type ctlAuditTransport struct {
	a        *ctlDeleteAudit
	identity string
	next     http.RoundTripper
}

func (a *ctlDeleteAudit) wrap(identity string, next http.RoundTripper) http.RoundTripper {
	return &ctlAuditTransport{a: a, identity: identity, next: next}
}

func (t *ctlAuditTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// api/v1/namespaces/NS/pods/NAME
	if req.Method != http.MethodDelete || len(parts) != 6 || parts[4] != "pods" {
		return t.next.RoundTrip(req)
	}
	d := ctlPodDelete{Identity: t.identity, Namespace: parts[3], Name: parts[5]}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		d.Grace = deleteGrace(b)
	}
	if g := req.URL.Query().Get("gracePeriodSeconds"); g != "" && d.Grace == nil {
		var v int64
		if err := json.Unmarshal([]byte(g), &v); err == nil {
			d.Grace = &v
		}
	}
	// Recorded before it is sent, so a test that sees the deletion's effect
	// also sees the call.
	t.a.mu.Lock()
	i := len(t.a.deletes)
	t.a.deletes = append(t.a.deletes, d)
	t.a.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
	if resp != nil {
		t.a.mu.Lock()
		t.a.deletes[i].Code = resp.StatusCode
		t.a.mu.Unlock()
	}
	return resp, err
}

// deleteGrace decodes the grace period of a DeleteOptions body, JSON or
// protobuf.
func deleteGrace(b []byte) *int64 {
	var opts metav1.DeleteOptions
	if json.Unmarshal(b, &opts) == nil {
		return opts.GracePeriodSeconds
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if o, ok := obj.(*metav1.DeleteOptions); ok && err == nil {
		return o.GracePeriodSeconds
	}
	return nil
}

func (a *ctlDeleteAudit) all() []ctlPodDelete {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ctlPodDelete(nil), a.deletes...)
}

// forceDeletes lists the deletes with grace 0 by identity.
func (a *ctlDeleteAudit) forceDeletes() map[string][]string {
	out := map[string][]string{}
	for _, d := range a.all() {
		if d.Grace != nil && *d.Grace == 0 {
			out[d.Identity] = append(out[d.Identity], d.Namespace+"/"+d.Name)
		}
	}
	return out
}

// assertNoControllerForceDelete: node controller, pet and ReplicaSet
// controllers never force delete; pod GC only the pods in allowedGC.
func assertNoControllerForceDelete(t *testing.T, env *ctlEnv, allowedGC ...string) {
	t.Helper()
	got := env.audit.forceDeletes()
	for _, id := range []string{apiserver.IdentityNodeController, apiserver.IdentityPetController, apiserver.IdentityReplicaSetController} {
		if len(got[id]) > 0 {
			t.Errorf("%s force deleted %v", id, got[id])
		}
	}
	allowed := map[string]bool{}
	for _, p := range allowedGC {
		allowed[p] = true
	}
	for _, p := range got[apiserver.IdentityPodGC] {
		if !allowed[p] {
			t.Errorf("podgc force deleted %s, whose node exists", p)
		}
	}
}

// ctlInterval is one container's execution from the ledger.
type ctlInterval struct {
	uid        string
	start, end time.Time // end zero: still running
}

// executions groups the ledger's container executions by pod identity
// (namespace/name), in start order.
func ctlExecutions(l *kubelet.MemoryLedger) map[string][]ctlInterval {
	open := map[string]int{} // uid/container -> index in out[pod]
	out := map[string][]ctlInterval{}
	for _, e := range l.Entries() {
		pod := e.Namespace + "/" + e.Pod
		k := e.UID + "/" + e.Container
		switch e.Action {
		case kubelet.ActionStart:
			out[pod] = append(out[pod], ctlInterval{uid: e.UID, start: e.Scaled})
			open[k] = len(out[pod]) - 1
		case kubelet.ActionExit:
			if i, ok := open[k]; ok {
				out[pod][i].end = e.Scaled
				delete(open, k)
			}
		}
	}
	return out
}

// ctlOverlaps returns pairs of executions of one identity by different pod
// instances that ran at the same time.
func ctlOverlaps(ivs []ctlInterval) [][2]ctlInterval {
	var out [][2]ctlInterval
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.uid == b.uid {
				continue
			}
			aEnds := !a.end.IsZero() && !a.end.After(b.start)
			bEnds := !b.end.IsZero() && !b.end.After(a.start)
			if !aEnds && !bEnds {
				out = append(out, [2]ctlInterval{a, b})
			}
		}
	}
	return out
}

func ctlWait(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctlGetPod(cs kubernetes.Interface, ns, name string) (*corev1.Pod, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	return p, true
}

func ctlPartition(c *cluster.Cluster, node string) {
	for _, h := range c.MemberHosts() {
		c.Network().CutBoth(node, h)
	}
}

func ctlSimTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers:                    []corev1.Container{{Name: "app", Image: "sim"}},
		},
	}
}

func ctlHasCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// ctlOverlapsOfSet finds ledger executions of pods named prefix* that ran at
// the same time as pod uid old.
func ctlOverlapsOfSet(l *kubelet.MemoryLedger, prefix, old string) [][2]ctlInterval {
	var all []ctlInterval
	for pod, ivs := range ctlExecutions(l) {
		if strings.HasPrefix(pod, "default/"+prefix) {
			all = append(all, ivs...)
		}
	}
	var out [][2]ctlInterval
	for _, ov := range ctlOverlaps(all) {
		if ov[0].uid == old || ov[1].uid == old {
			out = append(out, ov)
		}
	}
	return out
}

func ctlDedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func ctlNodeCond(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func ctlHasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// ctlPetSet is a StatefulSet of simulated pets, each with one RWO volume
// ("data") that its container writes every scaled second.
func ctlPetSet(name string, replicas int32) *appsv1.StatefulSet {
	tmpl := ctlSimTemplate(name)
	tmpl.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "app": "write=1s"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: name,
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:             tmpl,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		},
	}
}

// ctlWrites returns the storage's accepted writes to volume, in the order
// it applied them.
func ctlWrites(l *kubelet.MemoryLedger, volume string) []kubelet.LedgerEntry {
	var out []kubelet.LedgerEntry
	for _, e := range l.Entries() {
		if e.Action == kubelet.ActionWrite && e.Volume == volume {
			out = append(out, e)
		}
	}
	return out
}

// ctlInterleaved reports PS-15 violations in a volume's accepted writes:
// once a pod instance (UID) has written after another, the earlier one
// never writes again.
func ctlInterleaved(writes []kubelet.LedgerEntry) []string {
	var out []string
	done := map[string]bool{}
	cur := ""
	for _, w := range writes {
		if w.UID == cur {
			continue
		}
		if done[w.UID] {
			out = append(out, fmt.Sprintf("%s (node %s, token %d) wrote at %s after %s took over",
				w.UID, w.Node, w.Token, w.Scaled.Format(time.RFC3339Nano), cur))
		}
		if cur != "" {
			done[cur] = true
		}
		cur = w.UID
	}
	return out
}

// ctlWritersOf lists the pod UIDs that wrote volume, in first-write order.
func ctlWritersOf(writes []kubelet.LedgerEntry) []string {
	var uids []string
	for _, w := range writes {
		uids = append(uids, w.UID)
	}
	return ctlDedupe(uids)
}
