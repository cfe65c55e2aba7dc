package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/podsafe/podsafe/target/kube/binaries"
)

// findEtcd returns the etcd binary to run: explicit (flag or environment),
// else the default build in podsafe's kube binaries cache, else the newest
// etcd of any build there.
func findEtcd(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("the etcd binary given with -etcd or PODSAFE_ETCD: %w", err)
		}
		return explicit, nil
	}
	cache, err := binaries.DefaultCacheDir()
	if err != nil {
		return "", err
	}
	v := binaries.DefaultVersions()
	def := filepath.Join(cache, "k8s-"+v.Kubernetes+"_etcd-"+v.Etcd, "bin", binaries.EtcdBinary)
	if isExecutable(def) {
		return def, nil
	}
	found, _ := filepath.Glob(filepath.Join(cache, "k8s-*_etcd-*", "bin", binaries.EtcdBinary))
	found = slices.DeleteFunc(found, func(p string) bool { return !isExecutable(p) })
	if len(found) == 0 {
		return "", fmt.Errorf("no etcd binary in %s (build one with `make kube-binaries`, or give one with -etcd or PODSAFE_ETCD)", cache)
	}
	slices.SortFunc(found, func(a, b string) int { return compareVersions(etcdVersionOf(a), etcdVersionOf(b)) })
	return found[len(found)-1], nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// etcdVersionOf reads the etcd version from a cache path
// (.../k8s-v1.37.2_etcd-v3.7.3/bin/etcd).
func etcdVersionOf(path string) string {
	dir := filepath.Base(filepath.Dir(filepath.Dir(path)))
	_, v, _ := strings.Cut(dir, "_etcd-")
	return v
}

// compareVersions orders vMAJOR.MINOR.PATCH versions numerically.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(strings.TrimPrefix(a, "v"), "."), strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// etcdVersion asks the binary for its version.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "version unknown: " + err.Error()
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "etcd Version: "); ok {
			return "etcd " + v
		}
	}
	return strings.TrimSpace(string(out))
}

// etcdCluster is three etcd processes on loopback.
type etcdCluster struct {
	cmds      []*exec.Cmd
	exited    []chan struct{}
	endpoints []string
}

// freePorts returns n TCP ports on 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startEtcd starts a 3-member cluster with data under dir and waits until
// it serves writes.
func startEtcd(ctx context.Context, bin, dir string, verbose bool) (*etcdCluster, error) {
	const n = 3
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i, ports[n+i]))
	}
	c := &etcdCluster{}
	for i := range n {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[n+i])
		c.endpoints = append(c.endpoints, client)
		cmd := exec.Command(bin,
			"--name", fmt.Sprintf("e%d", i),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("e%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "storebench",
			"--log-level", "warn",
		)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("e%d.log", i)))
		if err != nil {
			c.stop()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if verbose {
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			c.stop()
			return nil, fmt.Errorf("starting %s: %w", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
		c.cmds = append(c.cmds, cmd)
		c.exited = append(c.exited, exited)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.stop()
		return nil, err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = cli.Put(pctx, "/storebench/ready", "1")
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("etcd cluster not ready after 30s (logs in %s): %w", dir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *etcdCluster) pids() []int {
	var pids []int
	for _, cmd := range c.cmds {
		pids = append(pids, cmd.Process.Pid)
	}
	return pids
}

// stop terminates every member and waits for it.
func (c *etcdCluster) stop() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, cmd := range c.cmds {
		select {
		case <-c.exited[i]:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-c.exited[i]
		}
	}
}

// measureEtcd runs one etcd round: clients spread over the members, one
// connection per member, each create a put-if-absent transaction as
// kube-apiserver's etcd3 store sends it.
func measureEtcd(ctx context.Context, o options, w *workload, dir string) (result, error) {
	c, err := startEtcd(ctx, o.etcd, dir, o.verbose)
	if err != nil {
		return result{}, err
	}
	defer c.stop()
	var clis []*clientv3.Client
	defer func() {
		for _, cli := range clis {
			cli.Close()
		}
	}()
	for _, ep := range c.endpoints {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return result{}, err
		}
		clis = append(clis, cli)
	}
	value := string(w.value)
	pids := c.pids()
	return timedLoad(ctx, o, func() (time.Duration, error) { return procsCPU(pids) },
		func(ctx context.Context, prefix string, client, n int) error {
			key := "/registry/pods/" + benchNamespace + "/" + podName(prefix, client, n)
			cli := clis[client%len(clis)]
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := cli.Txn(rctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, value)).
				Commit()
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				return errors.New("key exists")
			}
			return nil
		})
}
