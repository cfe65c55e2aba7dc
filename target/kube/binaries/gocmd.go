package binaries

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// goCmd runs one go command with the machine's module proxy settings
// (GOPROXY, GONOSUMDB, ... as set) and the wrapper modules' own flags.
type goCmd struct {
	path      string   // the go command
	env       []string // os.Environ with GOFLAGS and GOWORK set for the wrappers
	log       io.Writer
	queryDir  string // an empty directory outside any module, for list and download
	goVersion string // `go env GOVERSION`
}

// newGoCmd finds the go command and reads its settings. The wrapper modules
// get GOFLAGS=-mod=mod on top of the machine's GOFLAGS (any -mod there is
// dropped: the wrappers write their own go.sum) and GOWORK=off (a go.work
// above the cache would pull the wrapper into someone's workspace).
func newGoCmd(goCommand string, log io.Writer) (*goCmd, error) {
	if goCommand == "" {
		goCommand = "go"
	}
	path, err := exec.LookPath(goCommand)
	if err != nil {
		return nil, fmt.Errorf("finding the go command %q: %w", goCommand, err)
	}
	if log == nil {
		log = io.Discard
	}
	dir, err := os.MkdirTemp("", "podsafe-kube-query-")
	if err != nil {
		return nil, fmt.Errorf("creating a directory for go queries: %w", err)
	}
	return &goCmd{path: path, env: os.Environ(), log: log, queryDir: dir}, nil
}

// init reads GOFLAGS (which may also come from `go env -w`) and GOVERSION
// and sets the wrapper environment.
func (g *goCmd) init(ctx context.Context) error {
	out, err := g.output(ctx, g.queryDir, nil, "env", "GOFLAGS", "GOVERSION")
	if err != nil {
		return fmt.Errorf("reading go env: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 {
		return fmt.Errorf("reading go env: unexpected output %q", out)
	}
	g.goVersion = strings.TrimSpace(lines[1])
	g.env = setEnv(g.env, "GOFLAGS", wrapperGoflags(lines[0]))
	g.env = setEnv(g.env, "GOWORK", "off")
	return nil
}

func (g *goCmd) close() {
	os.RemoveAll(g.queryDir)
}

// wrapperGoflags returns the machine's GOFLAGS with -mod=mod in place of any
// -mod flag.
func wrapperGoflags(machine string) string {
	var keep []string
	for _, f := range strings.Fields(machine) {
		if strings.HasPrefix(f, "-mod=") || strings.HasPrefix(f, "--mod=") {
			continue
		}
		keep = append(keep, f)
	}
	return strings.Join(append(keep, "-mod=mod"), " ")
}

// setEnv returns env with key set to value, replacing any earlier setting.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// output runs go with args in dir and returns its standard output. Its
// standard error goes to the log, and its tail into the error. Cancelling
// ctx kills the go command and the compilers and linkers it started.
func (g *goCmd) output(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, g.path, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.env...), extraEnv...)
	var stdout bytes.Buffer
	tail := &tailBuffer{max: 4096}
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(g.log, tail)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("go %s: %w", strings.Join(args, " "), ctx.Err())
		}
		msg := strings.TrimSpace(tail.String())
		if msg == "" {
			return stdout.Bytes(), fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
		return stdout.Bytes(), fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
