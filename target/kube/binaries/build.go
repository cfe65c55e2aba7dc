// Package binaries builds the real control plane podsafe's kube target runs:
// etcd, kube-apiserver, kube-scheduler and kube-controller-manager, compiled
// from the upstream modules the Go module proxy serves, once per pair of
// versions, into a cache directory that later runs reuse.
//
// Neither k8s.io/kubernetes nor the etcd server can be `go install`ed (their
// go.mod files have replace directives), so Build generates a small wrapper
// module for each (see KubernetesWrapperGoMod and EtcdWrapperGoMod) and runs
// go build inside it with the machine's module proxy settings.
package binaries

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Binary file names under <cache>/<versions>/bin.
const (
	EtcdBinary                  = "etcd"
	KubeAPIServerBinary         = "kube-apiserver"
	KubeSchedulerBinary         = "kube-scheduler"
	KubeControllerManagerBinary = "kube-controller-manager"
)

// binaryNames are the four binaries of a complete build.
var binaryNames = []string{EtcdBinary, KubeAPIServerBinary, KubeSchedulerBinary, KubeControllerManagerBinary}

// ManifestFile marks a complete build. It is written after every binary, and
// the build directory is renamed into place after it, so a directory without
// it (or whose binaries do not match it) is never reused.
const ManifestFile = "manifest.json"

// Recipe numbers how Build compiles (wrapper modules, flags). A cached build
// of another recipe is rebuilt, so a change of flags reaches every cache.
const Recipe = 1

// Options configures Build. The zero value builds the default versions into
// the default cache directory with the go command on PATH.
type Options struct {
	// CacheDir holds one directory per pair of versions. Empty means
	// DefaultCacheDir().
	CacheDir string
	// Versions to build. An empty Kubernetes means DefaultVersions(); an empty
	// Etcd means the one ResolveEtcdVersion picks for the Kubernetes version
	// (DefaultEtcdVersion for DefaultKubernetesVersion, without asking).
	Versions Versions
	// Log receives progress lines and the go command's own output. Nil
	// discards them.
	Log io.Writer
	// Go is the go command to run. Empty means "go" from PATH.
	Go string
	// Verify rehashes a cached build's binaries against its manifest before
	// reusing it (about a second per binary); without it a cached build is
	// checked by size only.
	Verify bool

	_ struct{}
}

// Paths locates the binaries of one build.
type Paths struct {
	// Dir is the build's cache directory; Dir/manifest.json describes it.
	Dir      string
	Versions Versions

	Etcd                  string
	KubeAPIServer         string
	KubeScheduler         string
	KubeControllerManager string

	// Reused is true when the binaries came from the cache.
	Reused bool
}

// Manifest is the content of ManifestFile.
type Manifest struct {
	// Recipe is the Recipe that built the binaries.
	Recipe     int    `json:"recipe"`
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd"`
	// Go is the toolchain that built the binaries ("go1.26.8").
	Go string `json:"go"`
	// Built is when the build finished, RFC 3339 UTC.
	Built    string                `json:"built"`
	Binaries map[string]BinaryInfo `json:"binaries"`
}

// BinaryInfo identifies one built binary.
type BinaryInfo struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// DefaultCacheDir returns os.UserCacheDir()/podsafe/kube.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w", err)
	}
	return filepath.Join(d, "podsafe", "kube"), nil
}

// cacheDir is opts.CacheDir, or DefaultCacheDir() when empty.
func (opts Options) cacheDir() (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	return DefaultCacheDir()
}

// Build returns the binaries of opts.Versions, building them first unless a
// complete build of those versions is in the cache. A cold build compiles
// about 1,000 CPU-seconds and needs about 3.5 GB of memory; a cached one
// returns at once without running go. Concurrent Builds of the same versions
// (in this or other processes) build once: the others wait on a lock file.
// A version the module proxy does not serve is ErrNotServed, naming the
// version and listing the served ones; a malformed one is ErrBadVersion.
// Cancelling ctx kills the go command and leaves no directory that a later
// Build would reuse.
func Build(ctx context.Context, opts Options) (Paths, error) {
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	cacheDir, err := opts.cacheDir()
	if err != nil {
		return Paths{}, err
	}
	v, resolve, err := normalizeVersions(opts.Versions)
	if err != nil {
		return Paths{}, err
	}
	if !resolve {
		// A complete build directory never changes once renamed into place,
		// so it can be reused without the lock and without the go command.
		if p, ok := reuse(filepath.Join(cacheDir, v.key()), v, opts.Verify); ok {
			return p, nil
		}
	}

	g, err := newGoCmd(opts.Go, log)
	if err != nil {
		return Paths{}, err
	}
	defer g.close()
	if err := g.init(ctx); err != nil {
		return Paths{}, err
	}
	if resolve {
		if v.Etcd, err = g.resolveEtcd(ctx, v.Kubernetes); err != nil {
			return Paths{}, err
		}
		fmt.Fprintf(log, "kubernetes %s: etcd %s (from its build/dependencies.yaml)\n", v.Kubernetes, v.Etcd)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return Paths{}, fmt.Errorf("creating the kube binaries cache %s: %w", cacheDir, err)
	}
	unlock, err := lockKey(ctx, cacheDir, v.key(), log)
	if err != nil {
		return Paths{}, err
	}
	defer unlock()

	dir := filepath.Join(cacheDir, v.key())
	if p, ok := reuse(dir, v, opts.Verify); ok {
		return p, nil
	}
	if _, err := os.Stat(dir); err == nil {
		fmt.Fprintf(log, "discarding %s: not a complete build of %s by recipe %d\n", dir, v, Recipe)
		if err := os.RemoveAll(dir); err != nil {
			return Paths{}, fmt.Errorf("removing the incomplete build %s: %w", dir, err)
		}
	}
	removeStaleBuilds(cacheDir, v.key())
	if err := checkVersionsServed(ctx, g, v); err != nil {
		return Paths{}, err
	}
	return buildInto(ctx, g, cacheDir, v, log)
}

// normalizeVersions fills in defaults and canonicalizes both versions.
// resolve is true when the etcd version must be resolved.
func normalizeVersions(in Versions) (v Versions, resolve bool, err error) {
	if in.Kubernetes == "" {
		in.Kubernetes = DefaultKubernetesVersion
	}
	k, err := normalizeKubernetes(in.Kubernetes)
	if err != nil {
		return Versions{}, false, err
	}
	v.Kubernetes = k.String()
	switch {
	case in.Etcd != "":
		e, err := normalizeEtcd(in.Etcd)
		if err != nil {
			return Versions{}, false, err
		}
		v.Etcd = e.String()
	case v.Kubernetes == DefaultKubernetesVersion:
		v.Etcd = DefaultEtcdVersion
	default:
		resolve = true
	}
	return v, resolve, nil
}

// checkVersionsServed reports every unserved module of v at once.
func checkVersionsServed(ctx context.Context, g *goCmd, v Versions) error {
	var errs []error
	for _, m := range []struct{ module, version string }{
		{KubernetesModule, v.Kubernetes},
		{EtcdServerModule, v.Etcd},
		{EtcdctlModule, v.Etcd},
	} {
		if err := g.checkServed(ctx, m.module, m.version); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// buildInto builds v in a fresh directory under cacheDir, writes the
// manifest last and renames the directory into place.
func buildInto(ctx context.Context, g *goCmd, cacheDir string, v Versions, log io.Writer) (_ Paths, err error) {
	tmp, err := os.MkdirTemp(cacheDir, ".build-"+v.key()+"-")
	if err != nil {
		return Paths{}, fmt.Errorf("creating a build directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Paths{}, fmt.Errorf("creating a build directory: %w", err)
	}
	bin := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return Paths{}, fmt.Errorf("creating a build directory: %w", err)
	}
	start := time.Now()
	fmt.Fprintf(log, "building %s into %s (cold: about 1,000 CPU-seconds and 3.5 GB of memory)\n", v, filepath.Join(cacheDir, v.key()))
	if err := buildEtcd(ctx, g, tmp, v.Etcd, log); err != nil {
		return Paths{}, err
	}
	if err := buildKubernetes(ctx, g, tmp, v.Kubernetes, log); err != nil {
		return Paths{}, err
	}
	m := Manifest{
		Recipe: Recipe, Kubernetes: v.Kubernetes, Etcd: v.Etcd, Go: g.goVersion,
		Built: time.Now().UTC().Format(time.RFC3339), Binaries: map[string]BinaryInfo{},
	}
	for _, name := range binaryNames {
		info, err := hashAndSync(filepath.Join(bin, name))
		if err != nil {
			return Paths{}, fmt.Errorf("recording %s %s: %w", name, v, err)
		}
		m.Binaries[name] = info
	}
	if err := writeManifest(tmp, m); err != nil {
		return Paths{}, err
	}
	dir := filepath.Join(cacheDir, v.key())
	if err := os.Rename(tmp, dir); err != nil {
		// Only a build that ignored the lock gets here; use its result.
		if p, ok := reuse(dir, v, false); ok {
			os.RemoveAll(tmp)
			return p, nil
		}
		return Paths{}, fmt.Errorf("moving the build of %s into place: %w", v, err)
	}
	syncDir(cacheDir)
	fmt.Fprintf(log, "built %s in %s\n", v, time.Since(start).Round(time.Second))
	return pathsOf(dir, v, false), nil
}

// buildEnv is added to the environment of go build: upstream builds these
// server binaries static, without cgo.
var buildEnv = []string{"CGO_ENABLED=0"}

func buildEtcd(ctx context.Context, g *goCmd, tmp, etcd string, log io.Writer) error {
	start := time.Now()
	srv, err := g.download(ctx, EtcdServerModule, etcd)
	if err != nil {
		return err
	}
	srvMod, err := os.ReadFile(srv.GoMod)
	if err != nil {
		return fmt.Errorf("reading the go.mod of %s %s: %w", EtcdServerModule, etcd, err)
	}
	gomod, err := EtcdWrapperGoMod(string(srvMod), etcd)
	if err != nil {
		return err
	}
	src, err := writeWrapper(tmp, "etcd", gomod)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "building etcd %s (go build %s)\n", etcd, EtcdServerModule)
	out := filepath.Join(tmp, "bin", EtcdBinary)
	if _, err := g.output(ctx, src, buildEnv, "build", "-trimpath", "-ldflags=-s -w", "-o", out, EtcdServerModule); err != nil {
		return fmt.Errorf("building etcd %s: %w", etcd, err)
	}
	fmt.Fprintf(log, "built etcd %s in %s\n", etcd, time.Since(start).Round(time.Second))
	return nil
}

func buildKubernetes(ctx context.Context, g *goCmd, tmp, kubernetes string, log io.Writer) error {
	start := time.Now()
	k, err := normalizeKubernetes(kubernetes)
	if err != nil {
		return err
	}
	km, err := g.download(ctx, KubernetesModule, kubernetes)
	if err != nil {
		return err
	}
	relMod, err := os.ReadFile(km.GoMod)
	if err != nil {
		return fmt.Errorf("reading the go.mod of kubernetes %s: %w", kubernetes, err)
	}
	gomod, err := KubernetesWrapperGoMod(string(relMod), kubernetes)
	if err != nil {
		return err
	}
	src, err := writeWrapper(tmp, "kubernetes", gomod)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "resolving the modules of kubernetes %s (go mod tidy)\n", kubernetes)
	if _, err := g.output(ctx, src, nil, "mod", "tidy"); err != nil {
		return fmt.Errorf("resolving the modules of kubernetes %s: %w", kubernetes, err)
	}
	date := releaseTime(km)
	if date == "" {
		date = time.Now().UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(log, "building kubernetes %s (go build %s)\n", kubernetes, strings.Join(KubernetesCommands, " "))
	args := append([]string{"build", "-trimpath", "-ldflags=" + kubernetesLdflags(k, date), "-o", filepath.Join(tmp, "bin") + string(filepath.Separator)}, KubernetesCommands...)
	if _, err := g.output(ctx, src, buildEnv, args...); err != nil {
		return fmt.Errorf("building kubernetes %s: %w", kubernetes, err)
	}
	fmt.Fprintf(log, "built kubernetes %s in %s\n", kubernetes, time.Since(start).Round(time.Second))
	return nil
}

// writeWrapper writes a wrapper module's go.mod under tmp/src/name. The
// wrappers stay in the cache beside the binaries: their go.mod and go.sum
// record exactly which modules went in.
func writeWrapper(tmp, name, gomod string) (string, error) {
	dir := filepath.Join(tmp, "src", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the %s wrapper module: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", fmt.Errorf("writing the %s wrapper module: %w", name, err)
	}
	return dir, nil
}

// hashAndSync returns a file's sha256 and size and flushes it to disk, so a
// crash after the manifest is written cannot leave a truncated binary.
func hashAndSync(path string) (BinaryInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return BinaryInfo{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return BinaryInfo{}, err
	}
	if err := f.Sync(); err != nil {
		return BinaryInfo{}, err
	}
	return BinaryInfo{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the manifest: %w", err)
	}
	path := filepath.Join(dir, ManifestFile)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	syncDir(dir)
	return nil
}

// readManifest reads dir's manifest.
func readManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, err
	}
	err = json.Unmarshal(b, &m)
	return m, err
}

// reuse returns the paths of a complete build of v in dir: its manifest
// names v and the current Recipe, and every binary is there, executable, of the recorded size (and,
// with verify, of the recorded sha256).
func reuse(dir string, v Versions, verify bool) (Paths, bool) {
	m, err := readManifest(dir)
	if err != nil || m.Recipe != Recipe || m.Kubernetes != v.Kubernetes || m.Etcd != v.Etcd {
		return Paths{}, false
	}
	for _, name := range binaryNames {
		want, ok := m.Binaries[name]
		if !ok {
			return Paths{}, false
		}
		path := filepath.Join(dir, "bin", name)
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || fi.Size() != want.Size {
			return Paths{}, false
		}
		if verify {
			got, err := hashFile(path)
			if err != nil || got != want.SHA256 {
				return Paths{}, false
			}
		}
	}
	return pathsOf(dir, v, true), true
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func pathsOf(dir string, v Versions, reused bool) Paths {
	bin := filepath.Join(dir, "bin")
	return Paths{
		Dir: dir, Versions: v, Reused: reused,
		Etcd:                  filepath.Join(bin, EtcdBinary),
		KubeAPIServer:         filepath.Join(bin, KubeAPIServerBinary),
		KubeScheduler:         filepath.Join(bin, KubeSchedulerBinary),
		KubeControllerManager: filepath.Join(bin, KubeControllerManagerBinary),
	}
}

// removeStaleBuilds removes the build directories of key that killed builds
// left behind. The caller holds key's lock, so none of them is in use.
func removeStaleBuilds(cacheDir, key string) {
	stale, _ := filepath.Glob(filepath.Join(cacheDir, ".build-"+key+"-*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
}

// syncDir flushes a directory's entries (a rename into it) to disk; errors
// are ignored: some filesystems cannot sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// ErrNotBuilt: the binaries of the asked versions are not in the cache.
var ErrNotBuilt = errors.New("kube binaries are not built")

// Cached returns the binaries of opts.Versions when a complete build of them
// is in the cache, without ever running the go command; ErrNotBuilt (naming
// `make kube-binaries`) otherwise. A version with no etcd given must be the
// default one: resolving another release's etcd needs the module proxy.
func Cached(opts Options) (Paths, error) {
	cacheDir, err := opts.cacheDir()
	if err != nil {
		return Paths{}, err
	}
	v, resolve, err := normalizeVersions(opts.Versions)
	if err != nil {
		return Paths{}, err
	}
	if resolve {
		// The etcd this release was built with is the one of its complete
		// build in the cache (kube build resolved it from the release's
		// build/dependencies.yaml); the newest, should there be several.
		dirs, _ := filepath.Glob(filepath.Join(cacheDir, "k8s-"+v.Kubernetes+"_etcd-*"))
		slices.Sort(dirs)
		for i := len(dirs) - 1; i >= 0; i-- {
			etcd := strings.TrimPrefix(filepath.Base(dirs[i]), "k8s-"+v.Kubernetes+"_etcd-")
			w := Versions{Kubernetes: v.Kubernetes, Etcd: etcd}
			if p, ok := reuse(dirs[i], w, opts.Verify); ok && w.key() == filepath.Base(dirs[i]) {
				return p, nil
			}
		}
		return Paths{}, fmt.Errorf("%w: kubernetes %s is not in %s: run podsafe kube build --version %s (or make kube-binaries KUBE_VERSION=%s)", ErrNotBuilt, v.Kubernetes, cacheDir, v.Kubernetes, v.Kubernetes)
	}
	if p, ok := reuse(filepath.Join(cacheDir, v.key()), v, opts.Verify); ok {
		return p, nil
	}
	return Paths{}, fmt.Errorf("%w: %s is not in %s: run make kube-binaries (or podsafe kube build)", ErrNotBuilt, v, cacheDir)
}
