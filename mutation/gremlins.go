package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// GremlinsVersion is the gremlins release podsafe pins (the Makefile
// installs it).
const GremlinsVersion = "v0.6.0"

// gremlinsOutput is the part of gremlins' --output JSON a mutation run
// reads (internal/report/internal/structure.go of v0.6.0).
type gremlinsOutput struct {
	Files []struct {
		Filename  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// ParseGremlins reads the mutants of pkg (a directory relative to the
// module root) from gremlins' JSON output of a dry run over it. Mutants of
// files in pkg's subdirectories are left out: they belong to other
// packages, whose unit tests are not pkg's.
func ParseGremlins(pkg string, r io.Reader) ([]Mutant, error) {
	var out gremlinsOutput
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading gremlins output for %s: %w", pkg, err)
	}
	var ms []Mutant
	for _, f := range out.Files {
		if strings.Contains(filepath.ToSlash(f.Filename), "/") {
			continue
		}
		for _, mu := range f.Mutations {
			if _, ok := replacements[mu.Type]; !ok {
				return nil, fmt.Errorf("gremlins output for %s: mutator %q of %s:%d is not one podsafe applies", pkg, mu.Type, f.Filename, mu.Line)
			}
			ms = append(ms, Mutant{
				Package: pkg, File: filepath.ToSlash(filepath.Join(pkg, f.Filename)),
				Line: mu.Line, Column: mu.Column, Mutator: mu.Type,
				// RUNNABLE: covered; NOT COVERED: not; a dry run gives no other.
				CoveredByUnit: mu.Status == "RUNNABLE",
			})
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID() < ms[j].ID() })
	return ms, nil
}

// Enumerate lists the mutants of pkg with gremlins' dry run. gremlins
// copies the whole module into a work directory of its own, so it runs
// over a snapshot of the module's tracked sources (store/ and bin/ of a
// working tree hold gigabytes of runs and binaries it must not copy);
// its coverage step runs pkg's unit tests there once.
func Enumerate(ctx context.Context, gremlins, snapshot, pkg string, logw io.Writer) ([]Mutant, error) {
	tmp, err := os.MkdirTemp("", "podsafe-gremlins-")
	if err != nil {
		return nil, fmt.Errorf("listing mutants of %s: %w", pkg, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "mutants.json")
	args := []string{"unleash", "--dry-run", "--output", out}
	for _, m := range Mutators {
		args = append(args, "--"+strings.ReplaceAll(strings.ToLower(m), "_", "-"))
	}
	args = append(args, "./"+pkg)
	cmd := exec.CommandContext(ctx, gremlins, args...)
	cmd.Dir = snapshot
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("gremlins unleash --dry-run ./%s: %w\n%s", pkg, err, tail(buf.String(), 20))
	}
	fmt.Fprint(logw, tail(buf.String(), 3))
	f, err := os.Open(out)
	if err != nil {
		return nil, fmt.Errorf("gremlins wrote no output for %s: %w", pkg, err)
	}
	defer f.Close()
	return ParseGremlins(pkg, f)
}

// ResolveCommit returns the full hash of commit (a hash, a branch, HEAD) in
// the git repository at root.
func ResolveCommit(ctx context.Context, root, commit string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("commit %q: not a commit of the repository at %s", commit, root)
	}
	return strings.TrimSpace(string(out)), nil
}

// Snapshot copies the module's tracked files except store/ and bin/ into
// dir: as the working tree has them when commit is empty, else as commit
// has them. A mutation run builds, tests and mutates the snapshot only, so
// edits made to the tree while it runs do not reach it (and gremlins, which
// copies the whole module, does not copy the gigabytes of store/).
func Snapshot(ctx context.Context, root, dir, commit string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("snapshot of %s: %w", root, err)
	}
	if commit != "" {
		// git archive keeps the files' modes; tar leaves store/ and bin/ out.
		sh := exec.CommandContext(ctx, "sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2" --exclude=store --exclude=bin`, "snapshot", commit, dir)
		sh.Dir = root
		if out, err := sh.CombinedOutput(); err != nil {
			return fmt.Errorf("snapshot of %s at %s: %w\n%s", root, commit, err, out)
		}
		return nil
	}
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("snapshot of %s: git ls-files: %w", root, err)
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" || strings.HasPrefix(rel, "store/") || strings.HasPrefix(rel, "bin/") {
			continue
		}
		src := filepath.Join(root, rel)
		st, err := os.Stat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", root, err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", root, err)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("snapshot of %s: %w", root, err)
		}
		if err := os.WriteFile(dst, b, st.Mode().Perm()); err != nil {
			return fmt.Errorf("snapshot of %s: %w", root, err)
		}
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
