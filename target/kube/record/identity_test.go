package record

import (
	"sync"
	"testing"

	"github.com/podsafe/podsafe/apiserver"
)

// The real components' own identities are none of podsafe's.
func TestOwnIdentitiesAreNotPodsafes(t *testing.T) {
	for _, id := range []string{IdentityControllerManager, IdentityAPIServer} {
		if apiserver.KnownIdentity(id) {
			t.Errorf("%q is one of podsafe's own identities", id)
		}
	}
}

// Every rule of Identity.
func TestIdentity(t *testing.T) {
	sa := func(name string) string { return "system:serviceaccount:kube-system:" + name }
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	for _, tc := range []struct {
		user   string
		groups []string
		want   string
		known  bool
	}{
		{"system:node:node-1", []string{"system:nodes", "system:authenticated"}, "kubelet:node-1", true},
		{"system:node:n.example.com", []string{"system:nodes"}, "kubelet:n.example.com", true},
		// Not a node to the Node authorizer without the group.
		{"system:node:node-1", []string{"system:authenticated"}, "user:system:node:node-1", false},
		{"system:node:", []string{"system:nodes"}, "user:system:node:", false},
		{"system:kube-scheduler", []string{"system:authenticated"}, "scheduler", true},
		{"system:kube-controller-manager", nil, "kube-controller-manager", true},
		{"system:apiserver", []string{"system:masters"}, "kube-apiserver", true},
		{sa("statefulset-controller"), saGroups, "pet-controller", true},
		{sa("replicaset-controller"), saGroups, "replicaset-controller", true},
		{sa("node-controller"), saGroups, "node-controller", true},
		{sa("taint-eviction-controller"), saGroups, "node-controller", true},
		{sa("pod-garbage-collector"), saGroups, "podgc", true},
		{sa("attachdetach-controller"), saGroups, "attachdetach-controller", true},
		{sa("disruption-controller"), saGroups, "disruption-controller", true},
		{sa("generic-garbage-collector"), saGroups, "garbage-collector", true},
		{sa("deployment-controller"), saGroups, "deployment-controller", true},
		{sa("namespace-controller"), saGroups, "namespace-controller", true},
		// kube-system accounts without a podsafe counterpart.
		{sa("shared-informers"), saGroups, "user:" + sa("shared-informers"), false},
		{sa("cronjob-controller"), saGroups, "user:" + sa("cronjob-controller"), false},
		// The same account name in another namespace is not a controller.
		{"system:serviceaccount:default:pod-garbage-collector", nil, "user:system:serviceaccount:default:pod-garbage-collector", false},
		{"podsafe:admin", []string{"system:masters", "system:authenticated"}, "admin", true},
		{"kubernetes-admin", []string{"system:masters"}, "admin", true},
		{"podsafe:workload", []string{"podsafe:workloads"}, "user:podsafe:workload", false},
		{"system:anonymous", []string{"system:unauthenticated"}, "user:system:anonymous", false},
		{"", nil, "user:(unauthenticated)", false},
	} {
		got, known := Identity(tc.user, tc.groups)
		if got != tc.want || known != tc.known {
			t.Errorf("Identity(%q, %q) = %q, %v; want %q, %v", tc.user, tc.groups, got, known, tc.want, tc.known)
		}
	}
}

// The caller's entries win; own users are skipped; Map tells who became
// whom.
func TestIdentityMap(t *testing.T) {
	m := NewIdentityMap()
	m.AddOwn("podsafe:admin", apiserver.IdentityAdmin)
	m.AddOwn("podsafe:fencing", apiserver.IdentityFencingController)
	m.Add("podsafe:workload", apiserver.IdentityWorkload)
	m.Add("system:kube-scheduler", "second-scheduler")
	for _, tc := range []struct {
		user   string
		groups []string
		want   string
		known  bool
		own    bool
	}{
		{"podsafe:admin", []string{"system:masters"}, "admin", true, true},
		{"podsafe:fencing", nil, "fencing-controller", true, true},
		{"podsafe:workload", nil, "workload", true, false},
		{"system:kube-scheduler", nil, "second-scheduler", true, false},
		{"system:node:node-3", []string{"system:nodes"}, "kubelet:node-3", true, false},
		{"someone", nil, "user:someone", false, false},
	} {
		got, known := m.Identity(tc.user, tc.groups)
		if got != tc.want || known != tc.known || m.Skipped(tc.user) != tc.own {
			t.Errorf("%q: identity %q, %v, skipped %v; want %q, %v, %v", tc.user, got, known, m.Skipped(tc.user), tc.want, tc.known, tc.own)
		}
	}
	// Add makes an own user an ordinary one.
	m.Add("podsafe:fencing", apiserver.IdentityFencingController)
	if m.Skipped("podsafe:fencing") {
		t.Error("Add left the user skipped")
	}
	if own := m.Own(); len(own) != 1 || own[0] != "podsafe:admin" {
		t.Errorf("Own() = %q", own)
	}
	got := m.Map()
	for user, want := range map[string]string{
		"podsafe:admin": "admin", "podsafe:workload": "workload", "system:kube-scheduler": "second-scheduler",
		"system:node:node-3": "kubelet:node-3", "someone": "user:someone", "system:node:*": "kubelet:*",
		"group:system:masters": "admin", "system:kube-controller-manager": "kube-controller-manager",
		"system:serviceaccount:kube-system:pod-garbage-collector":  "podgc",
		"system:serviceaccount:kube-system:statefulset-controller": "pet-controller",
	} {
		if got[user] != want {
			t.Errorf("Map()[%q] = %q, want %q", user, got[user], want)
		}
	}
	got["podsafe:admin"] = "changed"
	if m.Map()["podsafe:admin"] != "admin" {
		t.Error("Map returned the map's own state")
	}
}

// The map is safe for concurrent use.
func TestIdentityMapConcurrent(t *testing.T) {
	m := NewIdentityMap()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				m.Add("u", "x")
				m.Identity("system:node:n", []string{"system:nodes"})
				m.Identity(string(rune('a'+i))+string(rune('a'+j%26)), nil)
				m.Skipped("u")
				_ = m.Map()
			}
		})
	}
	wg.Wait()
}

// The zero value is an empty map.
func TestIdentityMapZero(t *testing.T) {
	var m IdentityMap
	if id, known := m.Identity("system:kube-scheduler", nil); id != "scheduler" || !known {
		t.Errorf("zero map: %q, %v", id, known)
	}
	if m.Skipped("x") || len(m.Own()) != 0 || m.Map()["system:kube-scheduler"] != "scheduler" {
		t.Error("zero map not empty")
	}
	var z IdentityMap
	z.AddOwn("me", "workload")
	if !z.Skipped("me") {
		t.Error("AddOwn on the zero value lost")
	}
}
