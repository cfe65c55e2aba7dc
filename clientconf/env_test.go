package clientconf

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

// testNamespace holds what the test writes and the manager's Lease.
const testNamespace = "clientconf"

// watchWindow is how many recent events each member keeps for watches to
// resume from.
const watchWindow = 100

// env is a running three-member embedded cluster and an admin clientset
// that checks it: every LIST it makes is a linearizable read.
type env struct {
	t     *testing.T
	c     *cluster.Cluster
	check kubernetes.Interface
}

// startEnv starts a durable cluster of three raft members (so members can
// crash and restart), three nodes with their kubelets, the scheduler and
// the controllers, on a clock ten times faster than the wall's, and
// creates the test's namespace.
func startEnv(t *testing.T) *env {
	t.Helper()
	cfg := cluster.Config{
		Topology:  cluster.DefaultTopology(3, 3, 1),
		Durable:   true,
		DataDir:   t.TempDir(),
		TimeScale: 10,
		Kubelets:  true, Scheduler: true, Controllers: true,
		// A short watch window, so that a client cut off for seconds
		// must list again (410 Gone), as etcd's compaction makes it.
		WatchWindow: watchWindow,
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
	e := &env{t: t, c: cluster.StartForTest(t, cfg)}
	var err error
	e.check, err = e.c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: "client-check", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}
	if err := retry(ctx, func(ctx context.Context) error {
		_, err := e.check.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("creating namespace %s: %v", testNamespace, err)
	}
	return e
}

// restConfig is admin's configuration for a client that sits on its own
// network host and dials member first (moving on to the next member when a
// dial fails, as a client with several endpoints does).
func (e *env) restConfig(host string, member int) *rest.Config {
	return e.c.RESTConfig(apiserver.IdentityAdmin, cluster.ClientOptions{Host: host, Member: member})
}

// externalConfig serves the cluster on a TLS loopback listener as
// `podsafe cluster up` does (each connection piped to a member through the
// simulated network, from host cluster.ExternalHost), writes its kubeconfig
// and returns the configuration client-go loads from it: the path a user's
// controller takes.
func (e *env) externalConfig() *rest.Config {
	t := e.t
	cert, err := cluster.NewServingCert()
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = e.c.ServeExternal(serveCtx, cert.Listener(tcp)) }()
	t.Cleanup(func() { stop(); <-served })
	path := filepath.Join(t.TempDir(), "podsafe.kubeconfig")
	if _, err := e.c.WriteKubeconfig(path, "https://"+tcp.Addr().String(), cert.CAPEM); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading kubeconfig %s: %v", path, err)
	}
	return cfg
}

// retry runs f until it succeeds (an AlreadyExists counts as success: an
// earlier attempt with an unknown outcome did it) or ctx ends.
func retry(ctx context.Context, f func(context.Context) error) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(rctx)
		cancel()
		if err == nil || isAlreadyExists(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
