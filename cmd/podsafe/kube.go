package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/target/kube/binaries"
)

func newKubeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "kube", Short: "the kube target: a real Kubernetes control plane built from upstream modules"}
	cmd.AddCommand(newKubeBuildCmd())
	return cmd
}

func newKubeBuildCmd() *cobra.Command {
	var (
		opts     binaries.Options
		goCmd    string
		cacheDir string
	)
	cmd := &cobra.Command{
		Use:   "build",
		Short: "build or reuse etcd, kube-apiserver, kube-scheduler and kube-controller-manager (cached by version)",
		Long: `build compiles the real control plane of the kube target from the modules the
Go module proxy serves (k8s.io/kubernetes and the etcd server), once per pair of
versions, into a cache directory, and prints the paths of the four binaries.
A later build of the same versions reuses them at once.

A cold build compiles for about 1,000 CPU-seconds and needs about 3.5 GB of
memory; run it niced on a shared machine. The default Kubernetes version is the
one matching podsafe's client-go, with the etcd its build/dependencies.yaml
names; another --version gets that release's etcd unless --etcd-version says.`,
		Example: `  make kube-binaries
  podsafe kube build --version v1.36.3
  podsafe kube build --version v1.37.2 --etcd-version v3.6.16 --cache-dir /tmp/kube`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Go = goCmd
			opts.CacheDir = cacheDir
			opts.Log = cmd.ErrOrStderr()
			p, err := binaries.Build(cmd.Context(), opts)
			if err != nil {
				if errors.Is(err, binaries.ErrBadVersion) || errors.Is(err, binaries.ErrNotServed) || errors.Is(err, binaries.ErrNoEtcdVersion) {
					return &exitError{code: exitUsage, err: err}
				}
				return &exitError{code: exitCrashed, err: err}
			}
			how := "built"
			if p.Reused {
				how = "reused"
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: %s in %s\n", how, p.Versions, p.Dir)
			for _, b := range []struct{ name, path string }{
				{binaries.EtcdBinary, p.Etcd},
				{binaries.KubeAPIServerBinary, p.KubeAPIServer},
				{binaries.KubeSchedulerBinary, p.KubeScheduler},
				{binaries.KubeControllerManagerBinary, p.KubeControllerManager},
			} {
				fmt.Fprintf(out, "%-24s %s\n", b.name, b.path)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Versions.Kubernetes, "version", "", "Kubernetes release to build (default "+binaries.DefaultKubernetesVersion+", matching podsafe's client-go)")
	fl.StringVar(&opts.Versions.Etcd, "etcd-version", "", "etcd release to build (default: the one the Kubernetes release's build/dependencies.yaml names, newest served patch)")
	fl.StringVar(&cacheDir, "cache-dir", "", "directory holding one build per pair of versions (default <user cache dir>/podsafe/kube)")
	fl.BoolVar(&opts.Verify, "verify", false, "rehash a cached build's binaries against its manifest before reusing it")
	fl.StringVar(&goCmd, "go", "go", "the go command that builds them")
	return cmd
}
