package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/internal/dirlock"
	"github.com/podsafe/podsafe/raftstore"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "run the embedded cluster by itself"}
	cmd.AddCommand(newClusterUpCmd())
	return cmd
}

func newClusterUpCmd() *cobra.Command {
	var (
		members, nodes, zones int
		listen, kubeconfig    string
		dataDir               string
		durable, verbose      bool
		agents, fence         bool
		timeScale             float64
		targetName            string
		kf                    kubeFlags
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "start an in-process cluster and serve its API on a loopback port until Ctrl-C",
		Example: `  podsafe cluster up --members 3 --nodes 3
  podsafe cluster up --target kube --members 3 --apiservers 2
  kubectl --kubeconfig podsafe.kubeconfig get nodes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNodesZones(nodes, zones); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if cmd.Flags().Changed("zones") {
				if err := checkZonesFit(nodes, zones); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			if members != 1 && members != 3 && members != 5 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--members must be 1, 3 or 5, got %d", members)}
			}
			if !(timeScale >= 1) || math.IsInf(timeScale, 1) { // NaN fails >=
				return &exitError{code: exitUsage, err: fmt.Errorf("--time-scale must be at least 1 and finite, got %g", timeScale)}
			}
			switch targetName {
			case "embedded":
			case "kube":
				return kubeClusterUp(cmd, &kf, members, nodes, zones, kubeconfig, dataDir, verbose)
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("--target %q: choose embedded or kube", targetName)}
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			cfg := cluster.Config{
				Topology:    cluster.DefaultTopology(members, nodes, zones),
				Durable:     durable,
				DataDir:     dataDir,
				TimeScale:   timeScale,
				Logger:      log,
				Kubelets:    agents,
				Scheduler:   agents,
				Controllers: agents,
				Fencing:     cluster.FencingOptions{Enabled: agents && fence},
			}
			if dataDir != "" && !durable {
				return &exitError{code: exitUsage, err: fmt.Errorf("--data-dir %s holds a durable cluster's raft log: add --durable", dataDir)}
			}
			if durable && dataDir == "" {
				d, err := os.MkdirTemp("", "podsafe-data-")
				if err != nil {
					return &exitError{code: exitCrashed, err: err}
				}
				cfg.DataDir = d
			}
			c, err := cluster.New(cfg)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			startCtx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			err = c.Start(startCtx)
			cancel()
			if err != nil {
				return dataDirError(err, cfg.DataDir, members)
			}
			defer c.Close()
			cert, err := cluster.NewServingCert()
			if err != nil {
				return &exitError{code: exitCrashed, err: err}
			}
			tcp, err := net.Listen("tcp", listen)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("listening on %s: %w", listen, err)}
			}
			ln := cert.Listener(tcp)
			server := "https://" + tcp.Addr().String()
			abs, _ := filepath.Abs(kubeconfig)
			caFile := strings.TrimSuffix(kubeconfig, filepath.Ext(kubeconfig)) + "-ca.crt"
			contexts, err := c.WriteKubeconfig(kubeconfig, server, cert.CAPEM)
			if err != nil {
				ln.Close()
				return &exitError{code: exitCrashed, err: err}
			}
			if err := os.WriteFile(caFile, cert.CAPEM, 0o644); err != nil {
				ln.Close()
				return &exitError{code: exitCrashed, err: fmt.Errorf("writing CA certificate: %w", err)}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "podsafe cluster: %d members, %d nodes\n", members, nodes)
			fmt.Fprintf(out, "API server: %s\n", server)
			fmt.Fprintf(out, "kubeconfig: %s (admin)\n", abs)
			fmt.Fprintf(out, "contexts: one per identity (%s); the current one, %s, is admin\n", contextList(contexts[1:]), contexts[0])
			fmt.Fprintf(out, "try: kubectl --kubeconfig %s get nodes\n", kubeconfig)
			fmt.Fprintf(out, "     kubectl --kubeconfig %s --context %s delete pod NAME --force --grace-period=0   # refused: controllers only delete gracefully (PS-9)\n", kubeconfig, apiserver.IdentityPetController)
			fmt.Fprintf(out, "     kubectl --kubeconfig %s auth can-i delete pods --as=%s\n", kubeconfig, apiserver.IdentityPetController)
			// The tokens stay in the kubeconfig (mode 0600), out of
			// terminals and CI logs; the command reads admin's from there
			// (the first token after admin's entry in the users list).
			fmt.Fprintf(out, "     curl --cacert %s -H \"Authorization: Bearer $(awk '/^- name: admin$/ {u=1} u && /token:/ {print $2; exit}' %s)\" %s/api/v1/nodes\n", caFile, kubeconfig, server)
			fmt.Fprintln(out, "Ctrl-C stops the cluster.")
			if err := c.ServeExternal(cmd.Context(), ln); err != nil {
				return &exitError{code: exitCrashed, err: err}
			}
			fmt.Fprintln(out, "stopping")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&targetName, "target", "embedded", "system under test: embedded (podsafe's own control plane, in process) or kube (real etcd, kube-apiserver, kube-scheduler and kube-controller-manager processes)")
	kf.add(cmd)
	fl.IntVar(&members, "members", 3, "control-plane members: 1, 3 or 5 (kube target: etcd members)")
	fl.IntVar(&nodes, "nodes", 3, "worker nodes (registered Node objects)")
	fl.IntVar(&zones, "zones", 1, "zones the nodes are spread over")
	fl.StringVar(&listen, "listen", "127.0.0.1:0", "loopback address the API is served on")
	fl.BoolVar(&fence, "fencing", false, "also run the fencing controller (storage and power agents): a node whose lease stays stale for 20 scaled s is fenced and its pods force deleted")
	fl.StringVar(&kubeconfig, "kubeconfig", "podsafe.kubeconfig", "where to write the admin kubeconfig")
	fl.BoolVar(&durable, "durable", false, "keep raft's log on disk")
	fl.StringVar(&dataDir, "data-dir", "", "data directory of a durable cluster (default: a new temporary directory); it records its members, and a second cluster may not use it at the same time")
	fl.Float64Var(&timeScale, "time-scale", 1, "the cluster clock runs this many times faster than wall time")
	fl.BoolVar(&verbose, "verbose", false, "log every component at info level")
	fl.BoolVar(&agents, "agents", true, "run a kubelet per node (simulated containers) and the scheduler; false registers bare Node objects")
	return cmd
}

// dataDirError is the exit of a cluster that did not start: a usage error
// when the data directory belongs to another cluster or another process
// (nothing ran), a crash otherwise.
func dataDirError(err error, dataDir string, members int) error {
	var mismatch *raftstore.MembershipError
	if errors.As(err, &mismatch) {
		return &exitError{code: exitUsage, err: fmt.Errorf("--data-dir %s holds a %d-member cluster (%s), not --members %d: start it with --members %d, or use a new --data-dir",
			dataDir, len(mismatch.Recorded), strings.Join(mismatch.Recorded, ", "), members, len(mismatch.Recorded))}
	}
	var inUse *dirlock.InUseError
	if errors.As(err, &inUse) {
		return &exitError{code: exitUsage, err: fmt.Errorf("--data-dir %s: %w", dataDir, inUse)}
	}
	return &exitError{code: exitCrashed, err: err}
}

// contextList names the kubeconfig's identity contexts: the components,
// then the kubelets as one entry when there are more than three.
func contextList(contexts []string) string {
	var names, kubelets []string
	for _, c := range contexts {
		if _, ok := apiserver.KubeletNode(c); ok {
			kubelets = append(kubelets, c)
		} else {
			names = append(names, c)
		}
	}
	if len(kubelets) > 3 {
		kubelets = []string{fmt.Sprintf("%sNODE for each of %d nodes", apiserver.KubeletIdentityPrefix, len(kubelets))}
	}
	return strings.Join(append(names, kubelets...), ", ")
}
