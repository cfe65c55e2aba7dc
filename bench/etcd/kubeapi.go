package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/podsafe/podsafe/target"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// benchSchedulerName is the scheduler every benchmark pod asks for, which
// no scheduler is: the pods stay pending and unscheduled in every system,
// and no scheduler writes to them while they are counted.
const benchSchedulerName = "storebench"

// findKube returns the cached build of the real Kubernetes binaries
// (make kube-binaries), without building one: a benchmark does not start a
// ten-minute build.
func findKube() (binaries.Paths, error) {
	cache, err := binaries.DefaultCacheDir()
	if err != nil {
		return binaries.Paths{}, err
	}
	v := binaries.DefaultVersions()
	dir := filepath.Join(cache, "k8s-"+v.Kubernetes+"_etcd-"+v.Etcd)
	if _, err := os.Stat(filepath.Join(dir, binaries.ManifestFile)); err != nil {
		return binaries.Paths{}, fmt.Errorf("no build of Kubernetes %s and etcd %s in %s (build one with `make kube-binaries`)", v.Kubernetes, v.Etcd, cache)
	}
	p, err := binaries.Build(context.Background(), binaries.Options{Versions: v, Log: io.Discard})
	if err != nil {
		return binaries.Paths{}, err
	}
	if !p.Reused {
		return binaries.Paths{}, fmt.Errorf("the cached build in %s was not reusable", dir)
	}
	return p, nil
}

// measureKubeAPI runs one round against the real thing podsafe's API and
// store stand in for: three etcd members and a kube-apiserver in front of
// each, as podsafe's kube target runs them (TLS between all of them, on
// loopback). Its kube-scheduler and kube-controller-manager are stopped
// once it is up, as podsafe-api runs no scheduler or controller either; the
// CPU counted is the six etcd and kube-apiserver processes'. The pods are
// the same client-go creates as podsafe-api's, client i on API server i mod 3.
func measureKubeAPI(ctx context.Context, o options, w *workload, dir string) (result, error) {
	c, err := kube.New(kube.Config{Dir: dir, Binaries: o.kube, Etcd: 3, APIServers: 3, Network: kube.NetworkLoopback})
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.Start(startCtx, nil); err != nil {
		return result{}, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	var pids []int
	for _, comp := range c.Components() {
		switch comp.Role {
		case target.RoleStore, target.RoleAPIServer:
			pid := c.Pid(comp.Name)
			if pid == 0 {
				return result{}, fmt.Errorf("%s is not running", comp.Name)
			}
			pids = append(pids, pid)
		case target.RoleScheduler, target.RoleController:
			if err := c.Kill(ctx, comp.Name); err != nil {
				return result{}, fmt.Errorf("stopping %s: %w", comp.Name, err)
			}
		}
	}
	if len(pids) != 6 {
		return result{}, fmt.Errorf("%d etcd and kube-apiserver processes, want 6", len(pids))
	}
	var clients []kubernetes.Interface
	for i := range 3 {
		rc, err := c.RESTConfig(kube.AdminUser, "", i)
		if err != nil {
			return result{}, err
		}
		// As podsafe-api's clients: client-go's default content types
		// (protobuf bodies) and no client-side rate limit.
		rc.ContentConfig = rest.ContentConfig{}
		rc.QPS, rc.Burst = 0, 0
		rc.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
		rc.Timeout = 10 * time.Second
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return result{}, err
		}
		clients = append(clients, cs)
	}
	// ServiceAccount admission wants the namespace's default account,
	// which the stopped controller-manager may not have made yet.
	_, err = clients[0].CoreV1().ServiceAccounts(benchNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return result{}, fmt.Errorf("creating the default service account: %w", err)
	}
	return timedLoad(ctx, o, func() (time.Duration, error) { return procsCPU(pids) },
		func(ctx context.Context, prefix string, client, n int) error {
			pod := w.apiPod.DeepCopy()
			pod.Name = podName(prefix, client, n)
			_, err := clients[client%len(clients)].CoreV1().Pods(benchNamespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
}
