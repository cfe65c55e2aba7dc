package netns

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
)

// run runs a program with stdin (if not empty) and returns its standard
// output. A failure's error holds the command line, its standard error
// and, for a script on stdin, the script.
func run(ctx context.Context, log *slog.Logger, stdin, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	line := strings.Join(append([]string{name}, args...), " ")
	if log != nil {
		log.Debug("netns: ran", "cmd", line, "err", err)
	}
	if err != nil {
		msg := fmt.Sprintf("%s: %v", line, err)
		if e := strings.TrimSpace(stderr.String()); e != "" {
			msg += ": " + e
		}
		if stdin != "" {
			msg += "\nscript:\n" + stdin
		}
		return stdout.String(), fmt.Errorf("%s", msg)
	}
	return stdout.String(), nil
}

// ip runs ip with args in the host namespace.
func (n *Network) ip(ctx context.Context, args ...string) error {
	_, err := run(ctx, n.log, "", "ip", args...)
	return err
}

// ipIn runs ip with args in namespace ns (ip -n).
func (n *Network) ipIn(ctx context.Context, ns string, args ...string) error {
	return n.ip(ctx, append([]string{"-n", ns}, args...)...)
}

// nft runs nft with args in namespace ns ("": the host namespace), with
// stdin (a script for -f -) if not empty.
func (n *Network) nft(ctx context.Context, ns, stdin string, args ...string) (string, error) {
	return nftIn(ctx, n.log, ns, stdin, args...)
}

func nftIn(ctx context.Context, log *slog.Logger, ns, stdin string, args ...string) (string, error) {
	if ns == "" {
		return run(ctx, log, stdin, "nft", args...)
	}
	return run(ctx, log, stdin, "ip", append([]string{"netns", "exec", ns, "nft"}, args...)...)
}
