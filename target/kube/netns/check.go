package netns

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Capability bits of /proc/self/status's CapEff (linux/capability.h).
const (
	capNetAdmin = 12
	capSysAdmin = 21
)

// system is what Check looks at, injectable for tests.
type system struct {
	euid     int
	capEff   func() (uint64, error)
	lookPath func(string) (string, error)
	// probe tries an nftables transaction; called only when the privileges
	// and the programs are there.
	probe func() error
}

// Check returns nil when this process can make network namespaces and
// nftables packet drops: it has CAP_NET_ADMIN and CAP_SYS_ADMIN (root has
// both), the ip and nft programs are in PATH, and the kernel accepts an
// nftables table. Otherwise its error is one line naming what is missing
// and how to get it.
func Check() error {
	return check(system{
		euid:     os.Geteuid(),
		capEff:   effectiveCaps,
		lookPath: exec.LookPath,
		probe:    probeNft,
	})
}

func check(s system) error {
	var missing []string
	caps, capErr := s.capEff()
	hasCaps := capErr == nil && caps&(1<<capNetAdmin) != 0 && caps&(1<<capSysAdmin) != 0
	switch {
	case hasCaps:
	case s.euid != 0:
		missing = append(missing, "network faults need root (CAP_NET_ADMIN and CAP_SYS_ADMIN): run as root, or run --target kube without network faults")
	case capErr != nil:
		missing = append(missing, fmt.Sprintf("cannot read this process's capabilities (%v): network faults need CAP_NET_ADMIN and CAP_SYS_ADMIN", capErr))
	default:
		missing = append(missing, "root without CAP_NET_ADMIN and CAP_SYS_ADMIN (a container?): give it both (docker run --cap-add NET_ADMIN --cap-add SYS_ADMIN), or run --target kube without network faults")
	}
	if _, err := s.lookPath("ip"); err != nil {
		missing = append(missing, "ip not found in PATH: install Debian's iproute2 package")
	}
	if _, err := s.lookPath("nft"); err != nil {
		missing = append(missing, "nft not found in PATH: install Debian's nftables package")
	}
	if len(missing) == 0 && s.probe != nil {
		if err := s.probe(); err != nil {
			missing = append(missing, "nftables does not work here ("+oneLine(err.Error())+"): load the nf_tables kernel module (modprobe nf_tables)")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(missing, "; "))
}

// effectiveCaps reads the effective capability set of this process.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no CapEff line in /proc/self/status")
}

// probeNft checks (nft --check: a transaction the kernel validates and then
// aborts) that the kernel takes a table with a filter chain.
func probeNft() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	script := "table inet podsafe_probe {\n\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n\t}\n}\n"
	if _, err := run(ctx, nil, script, "nft", "--check", "-f", "-"); err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\nscript:")
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// oneLine joins the lines of s.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
