package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// kubeFlags are the kube target's flags, shared by `cluster up` and `test`.
type kubeFlags struct {
	version    string
	apiServers int
	network    string
	dir        string
	podList    string
}

func (k *kubeFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&k.version, "kube-version", "", "Kubernetes release of the kube target (default "+binaries.DefaultKubernetesVersion+"; built by make kube-binaries)")
	fl.IntVar(&k.apiServers, "apiservers", 1, "kube target: kube-apiservers, 1 to 3 (each with its own kube-scheduler and kube-controller-manager, leader-elected)")
	fl.StringVar(&k.network, "network", kube.NetworkAuto, "kube target: namespaces (each process in its own network namespace; root), loopback (no network faults), or auto")
	fl.StringVar(&k.podList, "kubelet-pod-list", "", "kube target: how podsafe's kubelets sync their pods: list (LIST resourceVersion=0, the kubelet before v1.35), watch-list (v1.35 on), or empty: as the kubelet of --kube-version")
}

// binaries returns the cached binaries of the asked version, or a usage
// error saying how to build them.
func (k *kubeFlags) binaries() (binaries.Paths, error) {
	p, err := binaries.Cached(binaries.Options{Versions: binaries.Versions{Kubernetes: k.version}})
	if err != nil {
		if errors.Is(err, binaries.ErrNotBuilt) || errors.Is(err, binaries.ErrBadVersion) {
			return p, &exitError{code: exitUsage, err: err}
		}
		return p, &exitError{code: exitCrashed, err: err}
	}
	return p, nil
}

// kubeClusterUp runs `podsafe cluster up --target kube`: a real control
// plane with podsafe's kubelets as its nodes, until Ctrl-C.
func kubeClusterUp(cmd *cobra.Command, kf *kubeFlags, members, nodes, zones int, kubeconfig, dataDir string, verbose bool) error {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	bins, err := kf.binaries()
	if err != nil {
		return err
	}
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "podsafe-kube-"); err != nil {
			return &exitError{code: exitCrashed, err: err}
		}
	}
	c, err := kube.New(kube.Config{Dir: dataDir, Binaries: bins, Etcd: members, APIServers: kf.apiServers, Network: kf.network, Logger: log})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	// Ctrl-C and SIGTERM stop every process and remove the network.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	topo := cluster.DefaultTopology(members, nodes, zones)
	var names []string
	var specs []kube.NodeSpec
	for _, n := range topo.Nodes {
		names = append(names, n.Name)
		specs = append(specs, kube.NodeSpec{Name: n.Name, Labels: n.Labels, Taints: n.Taints})
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "starting Kubernetes %s (etcd %s): %d etcd, %d kube-apiserver, in %s\n", bins.Versions.Kubernetes, bins.Versions.Etcd, members, kf.apiServers, dataDir)
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	defer c.Close()
	if err := c.Start(startCtx, names); err != nil {
		return &exitError{code: exitCrashed, err: fmt.Errorf("starting the control plane: %w", err)}
	}
	if why := c.NetworkFaultsUnavailable(); why != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "network faults unavailable: %s\n", why)
	}
	// podsafe's storage (StorageClass podsafe-rwo) before the nodes, whose
	// runtimes write to it.
	if err := c.StartStorage(startCtx, kube.StorageOptions{}); err != nil {
		return &exitError{code: exitCrashed, err: err}
	}
	if err := c.StartKubelets(startCtx, specs, kube.KubeletOptions{PodList: kf.podList}); err != nil {
		return &exitError{code: exitCrashed, err: err}
	}
	server, err := c.WriteKubeconfig(kubeconfig)
	if err != nil {
		return &exitError{code: exitCrashed, err: err}
	}
	abs, _ := filepath.Abs(kubeconfig)
	fmt.Fprintf(out, "API server: %s (network: %s)\n", server, c.NetworkMode())
	fmt.Fprintf(out, "kubeconfig: %s (admin)\n", abs)
	fmt.Fprintf(out, "logs: %s\n", filepath.Join(dataDir, "logs"))
	fmt.Fprintf(out, "try: kubectl --kubeconfig %s get nodes\n", kubeconfig)
	fmt.Fprintln(out, "Ctrl-C stops the cluster.")
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}
