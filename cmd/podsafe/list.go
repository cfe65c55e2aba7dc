package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/specs"
)

func newListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list the workloads, nemeses, checkers and planted bugs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "Workloads:")
			printMap(out, specs.Workloads())
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
			live := "inert in this build; make failpoint-enable makes them live"
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
