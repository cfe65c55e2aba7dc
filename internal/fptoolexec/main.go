// Command fptoolexec is podsafe's go -toolexec for failpoint builds: it
// makes the pingcap/failpoint markers of podsafe's packages live at compile
// time, rewriting copies of their sources in a temporary directory and never
// the tree. `make failpoint-toolexec` builds it; the Makefile's failpoint
// targets run go with -toolexec=<it> and a GOCACHE of their own.
//
// It does what pingcap's failpoint-toolexec does, with the rewriter of the
// pinned module (github.com/pingcap/failpoint/code, at the version go.mod
// pins), and mends three things that tool gets wrong at that version:
//
//   - it reuses one rewriter for a package's files, so a file with no
//     declaration (a package's doc.go) after a rewritten file inherits its
//     "rewritten" flag and is replaced by an empty copy (the build fails:
//     "package statement must be first");
//   - it writes its copies to $TMPDIR/failpoint-toolexec/<import path>/,
//     shared by every compile of the package, so a package and its test
//     variant compiled at once truncate each other's files mid-read;
//   - it exits 0 when the tool it ran failed.
//
// Each compile here gets a temporary directory of its own, removed when
// the compile ends, and fptoolexec exits with the tool's status.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pingcap/failpoint/code"
)

// module is the module whose packages are rewritten; dependencies never
// are.
const module = "github.com/podsafe/podsafe"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go build -toolexec=/path/to/fptoolexec …")
		os.Exit(2)
	}
	tool, args := os.Args[1], os.Args[2:]
	cleanup := func() {}
	if strings.TrimSuffix(filepath.Base(tool), ".exe") == "compile" {
		var err error
		if args, cleanup, err = rewrite(args); err != nil {
			fmt.Fprintf(os.Stderr, "fptoolexec: %v\n", err)
			os.Exit(1)
		}
	}
	cmd := exec.Command(tool, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	cleanup()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintf(os.Stderr, "fptoolexec: %v\n", err)
		os.Exit(1)
	}
}

// rewrite returns the compile's arguments with each of podsafe's source
// files that holds failpoint markers replaced by its rewritten copy, plus
// the file binding the markers' names to the package, and a cleanup that
// removes the copies.
func rewrite(args []string) ([]string, func(), error) {
	pkg := ""
	for i, a := range args {
		if a == "-p" && i+1 < len(args) {
			pkg = args[i+1]
			break
		}
	}
	if pkg != module && !strings.HasPrefix(pkg, module+"/") {
		return args, func() {}, nil
	}
	dir := ""
	cleanup := func() {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
	out := append([]string(nil), args...)
	pkgName := ""
	for i, a := range out {
		if !strings.HasSuffix(a, ".go") {
			continue
		}
		src, err := os.ReadFile(a)
		if err != nil || !bytes.Contains(src, []byte(`"github.com/pingcap/failpoint"`)) {
			continue // not a source of ours, or one without markers
		}
		var buf bytes.Buffer
		rw := &code.Rewriter{} // one per file: see the package comment
		rw.SetAllowNotChecked(true)
		rw.SetOutput(&buf)
		if err := rw.RewriteFile(a); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("rewriting %s: %w", a, err)
		}
		if !rw.GetRewritten() {
			continue
		}
		if dir == "" {
			if dir, err = os.MkdirTemp("", "podsafe-failpoint-"); err != nil {
				return nil, nil, err
			}
		}
		// The index keeps two files of one base name apart.
		copyPath := filepath.Join(dir, strconv.Itoa(i)+"_"+filepath.Base(a))
		if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
			cleanup()
			return nil, nil, err
		}
		out[i] = copyPath
		pkgName = rw.GetCurrentFile().Name.Name
	}
	if pkgName == "" {
		return args, cleanup, nil
	}
	binding := filepath.Join(dir, "failpoint_binding.go")
	body := fmt.Sprintf("package %s\n\nfunc %s(name string) string { return %q + name }\n", pkgName, code.ExtendPkgName, pkg+"/")
	if err := os.WriteFile(binding, []byte(body), 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}
	return append(out, binding), cleanup, nil
}
