package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
)

// Cleanup removes what a Network with prefix left behind when its process
// died before Close (a SIGKILLed run): it kills the processes still in the
// namespaces named "<prefix>-…" (SIGKILL) and deletes those namespaces,
// the link "<prefix>-gw" and the host namespace's table
// "inet podsafe_<prefix>". There is no state file: every name is derived
// from the prefix, which holds no '-', so nothing of another prefix
// matches. Removing nothing is not an error. Do not call it for the prefix
// of a Network in use.
func Cleanup(ctx context.Context, prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	return cleanup(ctx, prefix, nil)
}

// cleanup removes everything of prefix: the gateway link first (which takes
// its veth peer, and so the switch's link to the host namespace, at once),
// the table, then the namespaces.
func cleanup(ctx context.Context, prefix string, log *slog.Logger) error {
	var errs []error
	links, err := linkNames(ctx)
	if err != nil {
		errs = append(errs, err)
	} else if links[gwLink(prefix)] {
		if _, err := run(ctx, log, "", "ip", "link", "delete", gwLink(prefix)); err != nil {
			errs = append(errs, err)
		}
	}
	tables, err := tableNames(ctx)
	if err != nil {
		errs = append(errs, err)
	} else if tables[hostTable(prefix)] {
		if _, err := run(ctx, log, "", "nft", "delete", "table", "inet", hostTable(prefix)); err != nil {
			errs = append(errs, err)
		}
	}
	spaces, err := namespaces(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range spaces {
		if !ownedBy(prefix, ns) {
			continue
		}
		if err := deleteNamespace(ctx, log, ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netns: removing network %s: %w", prefix, err)
	}
	return nil
}

// deleteNamespace kills the processes in namespace ns and deletes it (if it
// exists). The kernel frees the namespace and its links once the last
// process has left it.
func deleteNamespace(ctx context.Context, log *slog.Logger, ns string) error {
	spaces, err := namespaces(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, s := range spaces {
		found = found || s == ns
	}
	if !found {
		return nil
	}
	out, err := run(ctx, log, "", "ip", "netns", "pids", ns)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range strings.Fields(out) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("netns: killing pid %d in %s: %w", pid, ns, err))
		}
	}
	if _, err := run(ctx, log, "", "ip", "netns", "delete", ns); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// leftovers lists the namespaces, links and tables of prefix.
func leftovers(ctx context.Context, prefix string) ([]string, error) {
	var left []string
	spaces, err := namespaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, ns := range spaces {
		if ownedBy(prefix, ns) {
			left = append(left, "namespace "+ns)
		}
	}
	links, err := linkNames(ctx)
	if err != nil {
		return nil, err
	}
	if links[gwLink(prefix)] {
		left = append(left, "link "+gwLink(prefix))
	}
	tables, err := tableNames(ctx)
	if err != nil {
		return nil, err
	}
	if tables[hostTable(prefix)] {
		left = append(left, "table inet "+hostTable(prefix))
	}
	return left, nil
}

// namespaces lists the named network namespaces (ip netns list).
func namespaces(ctx context.Context) ([]string, error) {
	out, err := run(ctx, nil, "", "ip", "-j", "netns", "list")
	if err != nil {
		return nil, err
	}
	var list []struct {
		Name string `json:"name"`
	}
	if err := unmarshalIP(out, &list); err != nil {
		return nil, fmt.Errorf("netns: reading ip -j netns list: %w", err)
	}
	names := make([]string, len(list))
	for i, l := range list {
		names[i] = l.Name
	}
	return names, nil
}

// linkNames returns the set of the host namespace's link names.
func linkNames(ctx context.Context) (map[string]bool, error) {
	out, err := run(ctx, nil, "", "ip", "-j", "link", "show")
	if err != nil {
		return nil, err
	}
	var list []struct {
		Name string `json:"ifname"`
	}
	if err := unmarshalIP(out, &list); err != nil {
		return nil, fmt.Errorf("netns: reading ip -j link: %w", err)
	}
	names := map[string]bool{}
	for _, l := range list {
		names[l.Name] = true
	}
	return names, nil
}

// tableNames returns the set of the host namespace's inet table names.
func tableNames(ctx context.Context) (map[string]bool, error) {
	out, err := run(ctx, nil, "", "nft", "-j", "list", "tables", "inet")
	if err != nil {
		return nil, err
	}
	var list struct {
		Nftables []struct {
			Table *struct {
				Name string `json:"name"`
			} `json:"table"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("netns: reading nft -j list tables: %w", err)
	}
	names := map[string]bool{}
	for _, o := range list.Nftables {
		if o.Table != nil {
			names[o.Table.Name] = true
		}
	}
	return names, nil
}
