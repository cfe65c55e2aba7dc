package binaries

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Module paths of what Build compiles.
const (
	// KubernetesModule holds kube-apiserver, kube-scheduler and
	// kube-controller-manager.
	KubernetesModule = "k8s.io/kubernetes"
	// EtcdServerModule is etcd's server module; its root package is the etcd
	// binary.
	EtcdServerModule = "go.etcd.io/etcd/server/v3"
	// EtcdctlModule is required beside the server at the same version so the
	// etcd modules resolve to one release.
	EtcdctlModule = "go.etcd.io/etcd/etcdctl/v3"
)

// The default versions. DefaultKubernetesVersion matches podsafe's client-go
// pin (k8s.io/client-go v0.37.2 in go.mod; a test keeps them together), and
// DefaultEtcdVersion is what ResolveEtcdVersion answers for it (that release's
// build/dependencies.yaml names etcd 3.7; v3.7.3 is its newest served patch).
// Pinning the pair keeps the default build reproducible and lets a cached one
// be found without asking the module proxy anything.
const (
	DefaultKubernetesVersion = "v1.37.2"
	DefaultEtcdVersion       = "v3.7.3"
)

// Versions names the releases of one control plane build. Both are module
// versions with the leading "v": Kubernetes "v1.37.2", Etcd "v3.7.3".
type Versions struct {
	Kubernetes string
	Etcd       string
}

// DefaultVersions returns the Kubernetes release matching podsafe's client-go
// pin and the etcd release it is tested with.
func DefaultVersions() Versions {
	return Versions{Kubernetes: DefaultKubernetesVersion, Etcd: DefaultEtcdVersion}
}

// String returns "kubernetes v1.37.2, etcd v3.7.3".
func (v Versions) String() string {
	return fmt.Sprintf("kubernetes %s, etcd %s", v.Kubernetes, v.Etcd)
}

// key names the cache directory of these versions.
func (v Versions) key() string {
	return "k8s-" + v.Kubernetes + "_etcd-" + v.Etcd
}

// release is a parsed vMAJOR.MINOR.PATCH[-pre] version.
type release struct {
	major, minor, patch int
	pre                 string // "-rc.0" or ""
}

// parseRelease parses "v1.37.2" (the "v" may be missing) into its parts.
func parseRelease(s string) (release, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	var r release
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t, r.pre = t[:i], t[i:]
	}
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return release{}, fmt.Errorf("%q: %w (want vMAJOR.MINOR.PATCH, e.g. %s)", s, ErrBadVersion, DefaultKubernetesVersion)
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return release{}, fmt.Errorf("%q: %w (want vMAJOR.MINOR.PATCH, e.g. %s)", s, ErrBadVersion, DefaultKubernetesVersion)
		}
		nums[i] = n
	}
	r.major, r.minor, r.patch = nums[0], nums[1], nums[2]
	return r, nil
}

// String returns the canonical "vMAJOR.MINOR.PATCH[-pre]".
func (r release) String() string {
	return fmt.Sprintf("v%d.%d.%d%s", r.major, r.minor, r.patch, r.pre)
}

// normalizeKubernetes checks a Kubernetes version and returns it with its "v".
func normalizeKubernetes(s string) (release, error) {
	r, err := parseRelease(s)
	if err != nil {
		return release{}, fmt.Errorf("kubernetes version %w", err)
	}
	if r.major != 1 {
		return release{}, fmt.Errorf("kubernetes version %q: %w (Kubernetes releases are v1.Y.Z)", s, ErrBadVersion)
	}
	return r, nil
}

// normalizeEtcd checks an etcd version and returns it with its "v".
func normalizeEtcd(s string) (release, error) {
	r, err := parseRelease(s)
	if err != nil {
		return release{}, fmt.Errorf("etcd version %w", err)
	}
	if r.major != 3 || r.minor < 5 {
		return release{}, fmt.Errorf("etcd version %q: %w (the etcd binary is built from %s, v3.5 and later)", s, ErrBadVersion, EtcdServerModule)
	}
	return r, nil
}

// stagingVersion is the version Kubernetes publishes its staging modules
// (k8s.io/api, k8s.io/client-go, ...) at for a release: v1.Y.Z -> v0.Y.Z.
func stagingVersion(k release) string {
	return fmt.Sprintf("v0.%d.%d%s", k.minor, k.patch, k.pre)
}

// servedVersions lists the versions of a module the Go module proxy serves,
// as `go list -m -versions` prints them (oldest first).
func (g *goCmd) servedVersions(ctx context.Context, module string) ([]string, error) {
	out, err := g.output(ctx, g.queryDir, nil, "list", "-m", "-versions", module)
	if err != nil {
		return nil, fmt.Errorf("listing the served versions of %s: %w", module, err)
	}
	fields := strings.Fields(strings.TrimSpace(string(out)))
	if len(fields) == 0 || fields[0] != module {
		return nil, fmt.Errorf("listing the served versions of %s: unexpected output %q", module, out)
	}
	return fields[1:], nil
}

// checkServed returns ErrNotServed, naming the served versions, when the proxy
// does not serve module at version.
func (g *goCmd) checkServed(ctx context.Context, module, version string) error {
	served, err := g.servedVersions(ctx, module)
	if err != nil {
		return err
	}
	if slices.Contains(served, version) {
		return nil
	}
	list := strings.Join(served, " ")
	if list == "" {
		list = "none"
	}
	return fmt.Errorf("%s %s: %w; served versions: %s", module, version, ErrNotServed, list)
}

// downloadedModule is what `go mod download -json` reports of one module.
type downloadedModule struct {
	Path    string
	Version string
	Error   string
	Info    string // the .info file: {"Version", "Time"}
	GoMod   string // the module's go.mod file
	Dir     string // the extracted module
}

// download fetches module@version into the module cache (reusing it when
// present) and returns where it is.
func (g *goCmd) download(ctx context.Context, module, version string) (downloadedModule, error) {
	out, err := g.output(ctx, g.queryDir, nil, "mod", "download", "-json", module+"@"+version)
	var m downloadedModule
	if jerr := json.Unmarshal(out, &m); jerr != nil && err == nil {
		err = fmt.Errorf("decoding go mod download -json output: %w", jerr)
	}
	if m.Error != "" {
		return m, fmt.Errorf("downloading %s@%s: %s", module, version, m.Error)
	}
	if err != nil {
		return m, fmt.Errorf("downloading %s@%s: %w", module, version, err)
	}
	return m, nil
}

// releaseTime reads the commit time of a downloaded module from its .info
// file ("2026-10-27T12:01:04Z"), or "" when the proxy gave none.
func releaseTime(m downloadedModule) string {
	b, err := os.ReadFile(m.Info)
	if err != nil {
		return ""
	}
	var info struct{ Time string }
	if json.Unmarshal(b, &info) != nil {
		return ""
	}
	return info.Time
}

// ResolveEtcdVersion returns the etcd release to build with a Kubernetes
// release: the etcd minor that release's build/dependencies.yaml names, at
// the newest patch the module proxy serves for both the etcd server and
// etcdctl. It downloads the Kubernetes module (which Build needs anyway).
// goCommand is the go command to run ("" means "go"). An unserved Kubernetes
// version is ErrNotServed, listing the served ones.
func ResolveEtcdVersion(ctx context.Context, goCommand, kubernetes string) (string, error) {
	g, err := newGoCmd(goCommand, nil)
	if err != nil {
		return "", err
	}
	defer g.close()
	k, err := normalizeKubernetes(kubernetes)
	if err != nil {
		return "", err
	}
	if err := g.init(ctx); err != nil {
		return "", err
	}
	return g.resolveEtcd(ctx, k.String())
}

func (g *goCmd) resolveEtcd(ctx context.Context, kubernetes string) (string, error) {
	if err := g.checkServed(ctx, KubernetesModule, kubernetes); err != nil {
		return "", err
	}
	m, err := g.download(ctx, KubernetesModule, kubernetes)
	if err != nil {
		return "", err
	}
	deps := filepath.Join(m.Dir, "build", "dependencies.yaml")
	b, err := os.ReadFile(deps)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("kubernetes %s: %w: the release has no build/dependencies.yaml; give the etcd version (--etcd-version)", kubernetes, ErrNoEtcdVersion)
	}
	if err != nil {
		return "", fmt.Errorf("reading the etcd version of kubernetes %s: %w", kubernetes, err)
	}
	named, err := EtcdVersionFromDependencies(string(b))
	if err != nil {
		return "", fmt.Errorf("kubernetes %s build/dependencies.yaml: %w", kubernetes, err)
	}
	server, err := g.servedVersions(ctx, EtcdServerModule)
	if err != nil {
		return "", err
	}
	ctl, err := g.servedVersions(ctx, EtcdctlModule)
	if err != nil {
		return "", err
	}
	v, err := newestPatch(named, server, ctl)
	if err != nil {
		return "", fmt.Errorf("kubernetes %s: %w", kubernetes, err)
	}
	return v, nil
}

// EtcdVersionFromDependencies returns the etcd version a Kubernetes release's
// build/dependencies.yaml names ("3.7.0"; an image suffix such as "-0" is
// dropped). It reads the one entry it needs rather than the whole format.
func EtcdVersionFromDependencies(yaml string) (string, error) {
	inEtcd := false
	sc := bufio.NewScanner(strings.NewReader(yaml))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(line, "- name:"); ok {
			inEtcd = unquote(name) == "etcd"
			continue
		}
		if !inEtcd {
			continue
		}
		if v, ok := strings.CutPrefix(line, "version:"); ok {
			v = unquote(v)
			if i := strings.IndexByte(v, '-'); i >= 0 {
				v = v[:i]
			}
			if _, err := parseRelease(v); err != nil {
				return "", fmt.Errorf("etcd entry: %w", err)
			}
			return strings.TrimPrefix(v, "v"), nil
		}
	}
	return "", fmt.Errorf("%w: no entry named \"etcd\" with a version", ErrNoEtcdVersion)
}

// unquote trims spaces, a trailing comment and the quotes around a YAML scalar.
func unquote(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return strings.Trim(s, `"'`)
}

// newestPatch returns the newest release of named's major.minor served in
// every list, ignoring pre-releases.
func newestPatch(named string, lists ...[]string) (string, error) {
	want, err := parseRelease(named)
	if err != nil {
		return "", err
	}
	var best *release
	for _, v := range lists[0] {
		r, err := parseRelease(v)
		if err != nil || r.pre != "" || r.major != want.major || r.minor != want.minor {
			continue
		}
		if !servedInAll(v, lists[1:]) {
			continue
		}
		if best == nil || r.patch > best.patch {
			best = &r
		}
	}
	if best == nil {
		return "", fmt.Errorf("%w: the release names etcd %s and no v%d.%d.x is served for both %s and %s (served: %s)",
			ErrNoEtcdVersion, named, want.major, want.minor, EtcdServerModule, EtcdctlModule, strings.Join(lists[0], " "))
	}
	return best.String(), nil
}

func servedInAll(v string, lists [][]string) bool {
	for _, l := range lists {
		if !slices.Contains(l, v) {
			return false
		}
	}
	return true
}
