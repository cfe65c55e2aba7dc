package record

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// realAPI is a real etcd and kube-apiserver, run with AuditPolicy.
type realAPI struct {
	host  string
	audit string
	token map[string]string // user -> bearer token
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess runs a binary until the test ends.
func startProcess(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, filepath.Base(name)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
}

// startRealAPI starts etcd and kube-apiserver of the cached build. It
// needs PODSAFE_KUBE_REAL=1 and `make kube-binaries` done.
func startRealAPI(t *testing.T) *realAPI {
	t.Helper()
	if os.Getenv("PODSAFE_KUBE_REAL") != "1" {
		t.Skip("set PODSAFE_KUBE_REAL=1 to run a real etcd and kube-apiserver (needs `make kube-binaries`)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin, err := binaries.Build(ctx, binaries.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	etcdClient, etcdPeer, apiPort := freePort(t), freePort(t), freePort(t)
	startProcess(t, dir, bin.Etcd, "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", etcdPeer), "--log-level=warn")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	api := &realAPI{host: fmt.Sprintf("https://127.0.0.1:%d", apiPort), audit: filepath.Join(dir, "audit.log"), token: map[string]string{}}
	var tokens []byte
	for i, u := range []struct{ name, groups string }{
		{"podsafe:admin", "system:masters"}, {"system:kube-scheduler", ""}, {"system:node:node-1", "system:nodes"},
		{"system:serviceaccount:kube-system:pod-garbage-collector", "system:serviceaccounts"},
	} {
		tok := fmt.Sprintf("token-%d-%d", i, time.Now().UnixNano())
		api.token[u.name] = tok
		tokens = fmt.Appendf(tokens, "%s,%s,uid-%d,%q\n", tok, u.name, i, u.groups)
	}
	tokenFile, policyFile := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(tokenFile, tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policyFile, AuditPolicy(), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, dir, bin.KubeAPIServer,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokenFile, "--authorization-mode=AlwaysAllow",
		"--disable-admission-plugins=ServiceAccount", "--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-key-file="+keyFile, "--service-account-signing-key-file="+keyFile,
		"--service-account-issuer=https://kubernetes.default.svc", "--endpoint-reconciler-type=none",
		"--audit-policy-file="+policyFile, "--audit-log-path="+api.audit, "--audit-log-format=json",
		"--audit-log-maxsize=0", "--audit-log-maxbackup=0")

	cs := api.client(t, "podsafe:admin")
	deadline := time.Now().Add(90 * time.Second)
	for {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err == nil && string(body) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready: %v (logs in %s)", err, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return api
}

func (a *realAPI) config(user string) *rest.Config {
	return &rest.Config{Host: a.host, BearerToken: a.token[user], TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 100, Burst: 100}
}

func (a *realAPI) client(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(a.config(user))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// span is when a client call ran, on the recorder's clock.
type span struct{ from, to int64 }

// On a real API server list items come without their kind: the system
// priority classes there at the start are recorded as ADDED objects of
// kind PriorityClass, as the watch would give them.
func TestRealAPIServerList(t *testing.T) {
	api := startRealAPI(t)
	gvr := schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}
	f := follow(t, api.config("podsafe:admin"), gvr, "")
	f.waitLogs(LogStoreEventsListed, 1)
	h := f.stop()
	if len(h.Store) != 2 {
		t.Fatalf("store lines %+v, want the two system priority classes", h.Store)
	}
	for _, e := range h.Store {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(e.Object, &tm); err != nil || tm.Kind != "PriorityClass" || tm.APIVersion != "scheduling.k8s.io/v1" ||
			e.Type != history.StoreAdded || e.Resource != "priorityclasses.scheduling.k8s.io" || !strings.HasPrefix(e.Name, "system-") {
			t.Errorf("store line %+v (type %+v, %v)", e, tm, err)
		}
	}
	checkIncreasing(t, h.Store)
	checkEnd(t, h, "priorityclasses.scheduling.k8s.io", "")
}

// A real kube-apiserver's audit log, run with AuditPolicy, converts into
// the calls made, within the times the clients saw them; FollowResource
// records its pod changes.
func TestRealAPIServer(t *testing.T) {
	api := startRealAPI(t)
	rec, hpath := newRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tailDone := make(chan error, 1)
	go func() { tailDone <- (&AuditTailer{Rec: rec, Paths: []string{api.audit}}).Run(ctx) }()
	followDone := make(chan error, 1)
	go func() {
		followDone <- FollowResource(ctx, api.config("podsafe:admin"), podsGVR, "t", rec, FollowOptions{WatchTimeout: 3 * time.Second})
	}()

	adm, sched := api.client(t, "podsafe:admin"), api.client(t, "system:kube-scheduler")
	kubelet, pgc := api.client(t, "system:node:node-1"), api.client(t, "system:serviceaccount:kube-system:pod-garbage-collector")
	bg := context.Background()
	spans := map[string]span{}
	timed := func(name string, f func() error) {
		t.Helper()
		from := rec.Now().Nanoseconds()
		err := f()
		spans[name] = span{from, rec.Now().Nanoseconds()}
		if err != nil && name != "conflict" {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := adm.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p, q, g *corev1.Pod
	timed("create", func() (err error) {
		p, err = adm.CoreV1().Pods("t").Create(bg, pod("t", "p"), metav1.CreateOptions{})
		return
	})
	timed("bind", func() error {
		return sched.CoreV1().Pods("t").Bind(bg, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: p.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	})
	timed("conflict", func() error {
		stale := p.DeepCopy()
		stale.Labels["v"] = "stale"
		_, err := adm.CoreV1().Pods("t").Update(bg, stale, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("stale update: %v, want a conflict", err)
		}
		return nil
	})
	timed("graceful", func() error { return adm.CoreV1().Pods("t").Delete(bg, "p", *metav1.NewDeleteOptions(30)) })
	timed("final", func() error {
		opts := *metav1.NewDeleteOptions(0)
		opts.Preconditions = metav1.NewUIDPreconditions(string(p.UID))
		return kubelet.CoreV1().Pods("t").Delete(bg, "p", opts)
	})
	timed("create-q", func() (err error) {
		q, err = adm.CoreV1().Pods("t").Create(bg, pod("t", "q"), metav1.CreateOptions{})
		return
	})
	timed("evict", func() error {
		return adm.PolicyV1().Evictions("t").Evict(bg, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "t"},
			DeleteOptions: metav1.NewDeleteOptions(10)})
	})
	timed("generated", func() (err error) {
		gp := pod("t", "")
		gp.GenerateName = "gen-"
		g, err = adm.CoreV1().Pods("t").Create(bg, gp, metav1.CreateOptions{})
		return
	})
	timed("query-delete", func() error {
		return pgc.CoreV1().RESTClient().Delete().Namespace("t").Resource("pods").Name(g.Name).
			Param("gracePeriodSeconds", "5").Do(bg).Error()
	})
	timed("list", func() error { _, err := sched.CoreV1().Pods("t").List(bg, metav1.ListOptions{}); return err })
	timed("watch", func() error {
		w, err := sched.CoreV1().Pods("").Watch(bg, metav1.ListOptions{})
		if err == nil {
			w.Stop()
		}
		return err
	})
	_ = q
	time.Sleep(time.Second) // the audit log and the watch catch up
	cancel()
	if err := <-tailDone; err != nil {
		t.Fatal(err)
	}
	if err := <-followDone; err != nil {
		t.Fatal(err)
	}
	rec.Close()
	h := load(t, hpath)

	find := func(identity, verb, sub, name string) history.APICall {
		t.Helper()
		for _, c := range h.API {
			if c.Identity == identity && c.Verb == verb && c.Resource == "pods" && c.Subresource == sub && c.Name == name && c.Namespace == "t" {
				return c
			}
		}
		t.Fatalf("no call %s %s pods/%s %s in %d calls", identity, verb, sub, name, len(h.API))
		return history.APICall{}
	}
	within := func(name string, c history.APICall) {
		t.Helper()
		const slack = int64(2 * time.Millisecond) // the server clock's microseconds, the hosts' clock reads
		s := spans[name]
		if c.Invoke < s.from-slack || c.Return > s.to+slack || c.Invoke > c.Return {
			t.Errorf("%s: call [%d, %d] outside the client's [%d, %d]", name, c.Invoke, c.Return, s.from, s.to)
		}
	}
	check := func(name string, c history.APICall, code int, out history.Status, grace *int64, uid, rv string) {
		t.Helper()
		within(name, c)
		g := func(p *int64) string {
			if p == nil {
				return "nil"
			}
			return strconv.FormatInt(*p, 10)
		}
		if c.Code != code || c.Outcome != out || g(c.GracePeriodSeconds) != g(grace) || c.UID != uid || (rv != "" && c.ResourceVersion != rv) {
			t.Errorf("%s: %+v (grace %s); want code %d, %s, grace %s, uid %q, rv %q", name, c, g(c.GracePeriodSeconds), code, out, g(grace), uid, rv)
		}
	}
	check("create", find("admin", "create", "", "p"), 201, history.StatusOK, nil, string(p.UID), p.ResourceVersion)
	check("bind", find("scheduler", "create", "binding", "p"), 201, history.StatusOK, nil, "", "")
	check("conflict", find("admin", "update", "", "p"), 409, history.StatusFail, nil, "", "")
	check("graceful", find("admin", "delete", "", "p"), 200, history.StatusOK, ptr(30), string(p.UID), "")
	check("final", find("kubelet:node-1", "delete", "", "p"), 200, history.StatusOK, ptr(0), string(p.UID), "")
	check("evict", find("admin", "create", "eviction", "q"), 201, history.StatusOK, ptr(10), "", "")
	check("generated", find("admin", "create", "", g.Name), 201, history.StatusOK, nil, string(g.UID), g.ResourceVersion)
	check("query-delete", find("podgc", "delete", "", g.Name), 200, history.StatusOK, ptr(5), string(g.UID), "")
	for _, c := range h.API {
		switch {
		case c.Verb == "list" && c.Identity == "scheduler" && c.Namespace == "t":
			within("list", c)
		case c.Verb == "watch" && c.Identity == "scheduler" && c.Namespace == "":
			within("watch", c)
			if c.Code != 200 || c.Outcome != history.StatusOK {
				t.Errorf("watch: %+v", c)
			}
		}
	}
	if bad := logsWith(h, LogAuditUndecodable); len(bad) > 0 {
		t.Errorf("undecodable audit lines: %+v", bad)
	}

	// The store lines of namespace t: every change of p, q and the
	// generated pod, in resourceVersion order, none twice.
	var got []string
	for _, e := range h.Store {
		got = append(got, string(e.Type)+" "+e.Name)
	}
	// A real API server writes a deletion as the update that sets the
	// deletion timestamp (grace 0 included), then the removal; an
	// eviction first writes the DisruptionTarget condition.
	want := []string{"ADDED p", "MODIFIED p", "MODIFIED p", "MODIFIED p", "DELETED p", "ADDED q", "MODIFIED q", "MODIFIED q",
		"DELETED q", "ADDED " + g.Name, "MODIFIED " + g.Name, "DELETED " + g.Name}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("store lines %q, want %q", got, want)
	}
	checkIncreasing(t, h.Store)
	if h.Store[0].RV != p.ResourceVersion {
		t.Errorf("p's creation at rv %s, the create answered %s", h.Store[0].RV, p.ResourceVersion)
	}
	checkEnd(t, h, "pods", "t")
	t.Logf("%d calls, %d store lines, %d log lines", len(h.API), len(h.Store), len(h.Logs))
	if os.Getenv("PODSAFE_KUBE_REAL_DUMP") != "" {
		b, _ := os.ReadFile(api.audit)
		t.Logf("audit log:\n%s", b)
	}
}
