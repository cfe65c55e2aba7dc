package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsafe/podsafe/specs"
)

func newDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "delete", Short: "delete objects from a running cluster, kubectl-style"}
	cmd.AddCommand(newDeletePodCmd())
	return cmd
}

func newDeletePodCmd() *cobra.Command {
	var (
		kubeconfig, namespace string
		grace                 int64
		force, confirm        bool
	)
	cmd := &cobra.Command{
		Use:   "pod NAME",
		Short: "delete a pod gracefully, or force delete it with --force --confirm (PS-16)",
		Long: `Deletes a pod. Without --force the pod is deleted gracefully: it is marked
terminating and its kubelet stops its containers within the grace period, then
removes it. --force deletes it at once (grace period 0): that needs --confirm,
because the pod's processes may keep running (PS-16).`,
		Example: `  podsafe delete pod web-0 --kubeconfig podsafe.kubeconfig
  podsafe delete pod db-0 --force --confirm`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if force && grace > 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--force deletes with grace period 0; it cannot be combined with --grace-period %d", grace)}
			}
			if confirm && !force {
				return &exitError{code: exitUsage, err: errors.New("--confirm confirms a force deletion; it needs --force")}
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)}
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)}
			}
			o := specs.DeletePodOptions{Force: force, Confirmed: confirm}
			if !force && grace >= 0 {
				o.GracePeriodSeconds = &grace
			}
			err = specs.DeletePod(cmd.Context(), cs, namespace, name, o, errOut)
			switch {
			case errors.Is(err, specs.ErrNeedsConfirmation):
				return &exitError{code: exitUsage, err: fmt.Errorf("not deleting pod %s/%s: a force deletion needs --confirm", namespace, name)}
			case err != nil:
				return &exitError{code: exitInvalid, err: err}
			}
			if force {
				fmt.Fprintf(out, "pod %s/%s force deleted\n", namespace, name)
			} else {
				fmt.Fprintf(out, "pod %s/%s deleted\n", namespace, name)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "podsafe.kubeconfig", "kubeconfig of the cluster (podsafe cluster up writes one)")
	fl.StringVarP(&namespace, "namespace", "n", "default", "the pod's namespace")
	fl.Int64Var(&grace, "grace-period", -1, "grace period in seconds (-1: the pod's own)")
	fl.BoolVar(&force, "force", false, "delete at once, without waiting for the kubelet (needs --confirm)")
	fl.BoolVar(&confirm, "confirm", false, "confirm a force deletion after reading the warning")
	return cmd
}
