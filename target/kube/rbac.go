package kube

// The roles podsafe's own components hold on the kube target (the fencing
// controller's ClusterRole) and their bindings, created once the API serves.

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FencingClusterRole is what podsafe's fencing controller may do on the
// kube target, and no more: read nodes, pods, node leases and volume
// attachments; write its fence record on Nodes (status condition, taint,
// annotations, unschedulable); force delete the pods of a fenced node and
// break its attachments; keep its fence-token counter Lease; write Events.
func FencingClusterRole() *rbacv1.ClusterRole {
	rule := policyRule
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "podsafe:fencing-controller"},
		Rules: []rbacv1.PolicyRule{
			rule("", []string{"nodes"}, "get", "list", "watch", "update", "patch"),
			rule("", []string{"nodes/status"}, "update", "patch"),
			rule("", []string{"pods"}, "get", "list", "watch", "delete"),
			rule("", []string{"events"}, "create", "patch", "update"),
			rule("events.k8s.io", []string{"events"}, "create", "patch", "update"),
			rule("coordination.k8s.io", []string{"leases"}, "get", "list", "watch", "create", "update"),
			rule("storage.k8s.io", []string{"volumeattachments"}, "get", "list", "watch", "delete"),
		},
	}
}

// policyRule is one RBAC rule: verbs on resources of group.
func policyRule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// createRetrying runs the create f until it succeeds or finds its object
// there already, retrying every 200 ms while the API (or its RBAC
// bootstrap) is not ready, until ctx ends; a refusal as invalid ends it at
// once. what names the object in the error.
func createRetrying(ctx context.Context, what string, f func() error) error {
	for {
		err := f()
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsInvalid(err):
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// bindRoles lets podsafe's workload user act as a cluster admin (it creates
// namespaces, priority classes, budgets and workloads of every kind) and
// gives the fencing user FencingClusterRole (RBAC; the kubelets need no
// binding: the Node authorizer decides for them).
func (c *Cluster) bindRoles(ctx context.Context) error {
	cs, err := c.clientFor(AdminUser, "", 0)
	if err != nil {
		return err
	}
	// The RBAC bootstrap may still be running: retry until ctx ends.
	retry := func(what string, f func() error) error { return createRetrying(ctx, what, f) }
	role := FencingClusterRole()
	if err := retry("creating ClusterRole "+role.Name, func() error {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	for u, r := range map[string]string{WorkloadUser: "cluster-admin", FencingUser: role.Name} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "podsafe-" + u[len("podsafe:"):]},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: u}},
		}
		if err := retry("binding "+u+" to "+r, func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
