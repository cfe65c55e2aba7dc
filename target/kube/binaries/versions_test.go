package binaries

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dependenciesYAML is a cut-down build/dependencies.yaml: other entries
// before and after etcd, some with versions and refPaths of their own.
const dependenciesYAML = `dependencies:
  # zeitgeist (https://github.com/kubernetes-sigs/zeitgeist) was inspired by
  - name: "zeitgeist"
    version: "v0.5.4"
    refPaths:
    - path: hack/verify-external-dependencies-version.sh
      match: sigs.k8s.io/zeitgeist@v.*

  # CoreDNS
  - name: "coredns-kube-up"
    version: 1.14.6
    refPaths:
    - path: cluster/addons/dns/coredns/coredns.yaml.base
      match: registry.k8s.io/coredns

  # etcd
  - name: "etcd"
    version: 3.7.0
    refPaths:
    - path: cluster/gce/manifests/etcd.manifest
      match: etcd_docker_tag|etcd_version

  - name: "etcd-image"
    version: 3.7.0-0
    refPaths:
    - path: cluster/images/etcd/Makefile
      match: BUNDLED_ETCD_VERSIONS\?|LATEST_ETCD_VERSION\?
`

func TestEtcdVersionFromDependencies(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"release file", dependenciesYAML, "3.7.0"},
		{"image suffix dropped", strings.Replace(dependenciesYAML, "version: 3.7.0\n", "version: 3.5.16-0\n", 1), "3.5.16"},
		{"quoted with v", strings.Replace(dependenciesYAML, "version: 3.7.0\n", "version: \"v3.6.4\" # pinned\n", 1), "3.6.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EtcdVersionFromDependencies(tc.yaml)
			if err != nil || got != tc.want {
				t.Errorf("EtcdVersionFromDependencies = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	noEtcd := strings.Replace(dependenciesYAML, `name: "etcd"`, `name: "not-etcd"`, 1)
	noEtcd = strings.Replace(noEtcd, `name: "etcd-image"`, `name: "image"`, 1)
	if _, err := EtcdVersionFromDependencies(noEtcd); !errors.Is(err, ErrNoEtcdVersion) {
		t.Errorf("no etcd entry: err = %v, want ErrNoEtcdVersion", err)
	}
}

func TestNewestPatch(t *testing.T) {
	server := []string{"v3.5.0", "v3.5.35", "v3.6.0", "v3.6.15", "v3.6.16", "v3.7.0-rc.0", "v3.7.0", "v3.7.1", "v3.7.3", "v3.7.4", "v3.8.0-alpha.0"}
	ctl := []string{"v3.5.35", "v3.6.16", "v3.7.1", "v3.7.3"}
	for _, tc := range []struct{ named, want string }{
		{"3.7.0", "v3.7.3"}, // v3.7.4 has no etcdctl: skipped
		{"3.6.4", "v3.6.16"},
		{"3.5.16", "v3.5.35"},
	} {
		got, err := newestPatch(tc.named, server, ctl)
		if err != nil || got != tc.want {
			t.Errorf("newestPatch(%s) = %q, %v; want %q", tc.named, got, err, tc.want)
		}
	}
	_, err := newestPatch("3.8.0", server, ctl)
	if !errors.Is(err, ErrNoEtcdVersion) || !strings.Contains(err.Error(), "etcd 3.8.0") || !strings.Contains(err.Error(), "v3.7.3") {
		t.Errorf("unserved minor: err = %v, want ErrNoEtcdVersion naming 3.8.0 and the served ones", err)
	}
}

func TestNormalizeVersions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Versions
		want    Versions
		resolve bool
		bad     bool
	}{
		{name: "zero is the default pair", want: DefaultVersions()},
		{name: "default kubernetes gets the default etcd", in: Versions{Kubernetes: "1.37.2"}, want: DefaultVersions()},
		{name: "other kubernetes resolves etcd", in: Versions{Kubernetes: "v1.36.3"}, want: Versions{Kubernetes: "v1.36.3"}, resolve: true},
		{name: "both given", in: Versions{Kubernetes: "v1.36.3", Etcd: "3.6.16"}, want: Versions{Kubernetes: "v1.36.3", Etcd: "v3.6.16"}},
		{name: "pre-release kept", in: Versions{Kubernetes: "v1.38.0-alpha.1", Etcd: "v3.7.3"}, want: Versions{Kubernetes: "v1.38.0-alpha.1", Etcd: "v3.7.3"}},
		{name: "two parts", in: Versions{Kubernetes: "v1.37"}, bad: true},
		{name: "not a number", in: Versions{Kubernetes: "latest"}, bad: true},
		{name: "leading zero", in: Versions{Kubernetes: "v1.037.2"}, bad: true},
		{name: "staging version", in: Versions{Kubernetes: "v0.37.2"}, bad: true},
		{name: "etcd 3.4", in: Versions{Etcd: "v3.4.30"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, resolve, err := normalizeVersions(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrBadVersion) {
					t.Errorf("err = %v, want ErrBadVersion", err)
				}
				return
			}
			if err != nil || got != tc.want || resolve != tc.resolve {
				t.Errorf("normalizeVersions(%+v) = %+v, %v, %v; want %+v, %v", tc.in, got, resolve, err, tc.want, tc.resolve)
			}
		})
	}
}

// TestDefaultVersionMatchesClientGo keeps DefaultKubernetesVersion on
// podsafe's client-go pin: the kube target's server and podsafe's clients are
// the same release.
func TestDefaultVersionMatchesClientGo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var pin string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/client-go" {
			pin = f[1]
		}
	}
	k, err := normalizeKubernetes(DefaultKubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	if want := stagingVersion(k); pin != want {
		t.Errorf("go.mod pins k8s.io/client-go %s; DefaultKubernetesVersion %s matches %s: move them together (and DefaultEtcdVersion to what ResolveEtcdVersion says)", pin, DefaultKubernetesVersion, want)
	}
}

func TestWrapperGoflags(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "-mod=mod",
		"-buildvcs=false":               "-buildvcs=false -mod=mod",
		"-mod=vendor -buildvcs=false":   "-buildvcs=false -mod=mod",
		"--mod=readonly -tags=netgo -v": "-tags=netgo -v -mod=mod",
	} {
		if got := wrapperGoflags(in); got != want {
			t.Errorf("wrapperGoflags(%q) = %q, want %q", in, got, want)
		}
	}
}
