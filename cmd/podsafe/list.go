package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/workload"
)

func newListCmd() *cobra.Command {
	var (
		targetName     string
		members, nodes int
		apiServers     int
		network        string
		fencingOn      bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list the workloads, nemeses, checkers and planted bugs",
		Example: `  podsafe list
  podsafe list --target kube --members 3 --apiservers 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			switch targetName {
			case "embedded":
			case "kube":
				return listKube(out, members, apiServers, nodes, network, fencingOn)
			case "kubeconfig":
				return listKubeconfig(out, nodes, fencingOn)
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("--target %q: choose embedded, kube or kubeconfig", targetName)}
			}
			fmt.Fprintln(out, "Workloads:")
			printMap(out, specs.Workloads())
			fmt.Fprintln(out, "\nWorkload knobs (a scenario's knobs, or --knob workload.knob=value; durations as 10s):")
			printKnobs(out)
			fmt.Fprintln(out, "\nNemeses:")
			for _, f := range nemesis.All() {
				fmt.Fprintf(out, "  %-20s %s (needs %s)\n", f.Name(), f.Describe(), strings.Trim(fmt.Sprint(f.Needs()), "[]"))
			}
			groups := nemesis.Groups()
			var gnames []string
			for g := range groups {
				gnames = append(gnames, g)
			}
			sort.Strings(gnames)
			for _, g := range gnames {
				var names []string
				for _, f := range groups[g] {
					names = append(names, f.Name())
				}
				fmt.Fprintf(out, "  %-20s any of: %s\n", g, strings.Join(names, ", "))
			}
			fmt.Fprintf(out, "  %-20s no faults\n", "none")
			fmt.Fprintln(out, "\nCheckers:")
			for _, c := range checker.Catalog() {
				fmt.Fprintf(out, "  %-20s %s\n", c.Name, c.Description)
			}
			live := "inert in this build; make build-failpoints builds bin/podsafe-failpoints, where they are live"
			if nemesis.FailpointsCompiled() {
				live = "live in this build"
			}
			fmt.Fprintf(out, "\nFailpoints (nemesis failpoint; %s):\n", live)
			for _, fp := range nemesis.Failpoints {
				fmt.Fprintf(out, "  %-20s %s (%s)\n", strings.TrimPrefix(fp.Name, "github.com/podsafe/podsafe/"), fp.Describe, fp.Term)
			}
			fmt.Fprintln(out, "\nPlanted bugs (--bug; make bugzoo runs them all):")
			bugs := map[string]string{}
			for _, b := range specs.Zoo() {
				bugs[b.Name] = b.Description + "; caught by " + b.Checker
			}
			printMap(out, bugs)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&targetName, "target", "embedded", "embedded, kube or kubeconfig: which faults the kube target (or an existing cluster) offers, and why the others are not")
	fl.IntVar(&members, "members", 3, "kube target: etcd members")
	fl.IntVar(&apiServers, "apiservers", 1, "kube target: kube-apiservers")
	fl.IntVar(&nodes, "nodes", 3, "kube target: podsafe's nodes")
	fl.StringVar(&network, "network", kube.NetworkAuto, "kube target: auto, namespaces or loopback")
	fl.BoolVar(&fencingOn, "fencing", false, "kube target: with podsafe's fencing controller (as podsafe test --fencing runs it)")
	return cmd
}

// kubeMissing says why faults that need a component the kube target lacks
// are not offered there.
var kubeMissing = map[string]string{
	"kill-fencing":  "podsafe's fencing controller runs only with --fencing",
	"pause-kubelet": "pausing podsafe's in-harness kubelets holds their links, which needs network namespaces",
	"ring":          "needs 5 etcd members (--members 5)",
}

// nodeNames are the names podsafe gives n nodes.
func nodeNames(n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("node-%d", i))
	}
	return names
}

// listKube prints every fault with whether the kube target of that shape
// offers it here, and why not.
func listKube(out io.Writer, members, apiServers, nodes int, network string, fencingOn bool) error {
	c, err := kube.Plan(kube.Config{Etcd: members, APIServers: apiServers, Network: network}, nodeNames(nodes), fencingOn)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	withFencing := ""
	if fencingOn {
		withFencing = ", fencing controller"
	}
	fmt.Fprintf(out, "Nemeses on the kube target (%d etcd, %d kube-apiserver, %d nodes%s, network %s):\n", members, apiServers, nodes, withFencing, c.NetworkMode())
	printFaults(out, c, func(name string) string {
		if why, ok := kubeMissing[name]; ok {
			return why
		}
		return "not with this shape (more etcd members or nodes needed)"
	})
	return nil
}

// listKubeconfig prints the faults podsafe can inject on an existing
// cluster, where it owns only its own nodes (and fencing controller), and
// why the others are not offered.
func listKubeconfig(out io.Writer, nodes int, fencingOn bool) error {
	c := kube.PlanExternal(nodeNames(nodes), fencingOn)
	fmt.Fprintf(out, "Nemeses on an existing cluster (--kubeconfig; %d nodes of podsafe's, links cut at their sockets):\n", nodes)
	printFaults(out, c, func(name string) string {
		switch name {
		case "kill-fencing":
			return kubeMissing[name]
		case "partition-storage":
			return "no shared storage server of podsafe's on an existing cluster"
		}
		return "podsafe owns only its nodes and fencing controller on an existing cluster, not its control plane"
	})
	return nil
}

// printFaults prints the faults c offers, then each other one with why not:
// the first capability it needs that c says it lacks, else missing's reason.
func printFaults(out io.Writer, c *kube.Cluster, missing func(name string) string) {
	var off []string
	for _, f := range nemesis.All() {
		if f.Available(c) {
			fmt.Fprintf(out, "  %-20s %s\n", f.Name(), f.Describe())
			continue
		}
		why := missing(f.Name())
		for _, need := range f.Needs() {
			if r := c.Unavailable(need); r != "" {
				why = r
				break
			}
		}
		off = append(off, fmt.Sprintf("  %-20s %s", f.Name(), why))
	}
	if len(off) > 0 {
		fmt.Fprintln(out, "\nNot available there:")
		for _, l := range off {
			fmt.Fprintln(out, l)
		}
	}
}

func printMap(out interface{ Write([]byte) (int, error) }, m map[string]string) {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	width := 20
	for _, k := range ks {
		width = max(width, len(k))
	}
	for _, k := range ks {
		fmt.Fprintf(out, "  %-*s %s\n", width, k, m[k])
	}
}

// printKnobs lists each workload's knobs and the values they take.
func printKnobs(out io.Writer) {
	for _, name := range workload.Names() {
		w, err := workload.Lookup(name)
		if err != nil {
			continue
		}
		var knobs []string
		for _, k := range workload.KnobsOf(w) {
			knobs = append(knobs, k.Name+" ("+k.Type+")")
		}
		fmt.Fprintf(out, "  %-20s %s\n", name, strings.Join(knobs, ", "))
	}
}
