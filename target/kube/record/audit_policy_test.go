package record

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// policy mirrors audit.k8s.io/v1 Policy, field for field, so that a
// misspelled field fails the strict decoding.
type policy struct {
	APIVersion        string       `json:"apiVersion"`
	Kind              string       `json:"kind"`
	OmitStages        []string     `json:"omitStages"`
	OmitManagedFields bool         `json:"omitManagedFields"`
	Rules             []policyRule `json:"rules"`
}

type policyRule struct {
	Level           string           `json:"level"`
	Users           []string         `json:"users"`
	UserGroups      []string         `json:"userGroups"`
	Verbs           []string         `json:"verbs"`
	Resources       []groupResources `json:"resources"`
	Namespaces      []string         `json:"namespaces"`
	NonResourceURLs []string         `json:"nonResourceURLs"`
	OmitStages      []string         `json:"omitStages"`
}

type groupResources struct {
	Group         string   `json:"group"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames"`
}

// request is what a policy rule matches on.
type request struct {
	verb, group, resource, path string
}

// level evaluates the policy as kube-apiserver does: the first rule whose
// every field matches, else None.
func (p policy) level(r request) string {
	for _, rule := range p.Rules {
		if len(rule.Verbs) > 0 && !slices.Contains(rule.Verbs, r.verb) {
			continue
		}
		if r.path != "" {
			if len(rule.Resources) > 0 {
				continue
			}
			if len(rule.NonResourceURLs) > 0 && !slices.ContainsFunc(rule.NonResourceURLs, func(u string) bool {
				if prefix, ok := strings.CutSuffix(u, "*"); ok {
					return strings.HasPrefix(r.path, prefix)
				}
				return u == r.path
			}) {
				continue
			}
			return rule.Level
		}
		if len(rule.NonResourceURLs) > 0 {
			continue
		}
		if len(rule.Resources) > 0 && !slices.ContainsFunc(rule.Resources, func(g groupResources) bool {
			return g.Group == r.group && (len(g.Resources) == 0 || slices.Contains(g.Resources, r.resource))
		}) {
			continue
		}
		return rule.Level
	}
	return "None"
}

func TestAuditPolicy(t *testing.T) {
	var p policy
	if err := yaml.UnmarshalStrict(AuditPolicy(), &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != "audit.k8s.io/v1" || p.Kind != "Policy" {
		t.Errorf("policy is %s %s", p.APIVersion, p.Kind)
	}
	if !slices.Equal(p.OmitStages, []string{StageRequestReceived}) {
		t.Errorf("omitStages = %q; ResponseStarted must stay (watches are recorded from it)", p.OmitStages)
	}
	for _, tc := range []struct {
		r    request
		want string
	}{
		{request{verb: "create", resource: "pods"}, "RequestResponse"},
		{request{verb: "delete", resource: "pods"}, "RequestResponse"},
		{request{verb: "deletecollection", resource: "pods"}, "RequestResponse"},
		{request{verb: "get", resource: "pods"}, "RequestResponse"},
		{request{verb: "create", resource: "pods/binding"}, "RequestResponse"},
		{request{verb: "create", resource: "pods/eviction"}, "RequestResponse"},
		{request{verb: "patch", resource: "pods/status"}, "RequestResponse"},
		{request{verb: "update", resource: "nodes/status"}, "RequestResponse"},
		{request{verb: "delete", resource: "nodes"}, "RequestResponse"},
		{request{verb: "create", group: "storage.k8s.io", resource: "volumeattachments"}, "RequestResponse"},
		{request{verb: "update", group: "apps", resource: "statefulsets/status"}, "RequestResponse"},
		{request{verb: "patch", group: "apps", resource: "replicasets/scale"}, "RequestResponse"},
		{request{verb: "update", group: "policy", resource: "poddisruptionbudgets/status"}, "RequestResponse"},
		{request{verb: "create", group: "scheduling.k8s.io", resource: "priorityclasses"}, "RequestResponse"},
		{request{verb: "list", resource: "pods"}, "Metadata"},
		{request{verb: "watch", resource: "nodes"}, "Metadata"},
		{request{verb: "update", group: "coordination.k8s.io", resource: "leases"}, "Metadata"},
		{request{verb: "get", resource: "pods/log"}, "Metadata"},
		{request{verb: "create", resource: "secrets"}, "Metadata"},
		{request{verb: "create", group: "events.k8s.io", resource: "events"}, "Metadata"},
		{request{verb: "watch", group: "events.k8s.io", resource: "events"}, "None"},
		{request{verb: "list", resource: "events"}, "None"},
		{request{verb: "get", path: "/healthz"}, "None"},
		{request{verb: "get", path: "/readyz/etcd"}, "None"},
		{request{verb: "get", path: "/livez"}, "None"},
		{request{verb: "get", path: "/version"}, "Metadata"},
	} {
		if got := p.level(tc.r); got != tc.want {
			t.Errorf("%+v: level %s, want %s", tc.r, got, tc.want)
		}
	}
}
