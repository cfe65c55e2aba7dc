package kube

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// User is one identity of the cluster: a static bearer token the API
// servers know (--token-auth-file), with the user name and groups a real
// cluster would give it.
type User struct {
	Name   string
	Groups []string
	Token  string
}

// The identities podsafe's own clients use on the kube target.
const (
	// AdminUser is the harness acting as cluster admin (system:masters).
	AdminUser = "podsafe:admin"
	// WorkloadUser runs the workloads (bound to cluster-admin).
	WorkloadUser = "podsafe:workload"
	// FencingUser is podsafe's fencing controller (bound to
	// FencingClusterRole).
	FencingUser = "podsafe:fencing"
	// SchedulerUser and ControllerManagerUser are the real components'
	// users, which the default RBAC policy knows.
	SchedulerUser         = "system:kube-scheduler"
	ControllerManagerUser = "system:kube-controller-manager"
)

// NodeUser is the user of node's kubelet: the Node authorizer and the
// NodeRestriction admission plugin key on it and on group system:nodes.
func NodeUser(node string) string { return "system:node:" + node }

// users is the token table of a cluster.
type users struct {
	byName map[string]User
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newUsers(nodes []string) *users {
	u := &users{byName: map[string]User{}}
	add := func(name string, groups ...string) {
		u.byName[name] = User{Name: name, Groups: groups, Token: newToken()}
	}
	add(AdminUser, "system:masters")
	add(WorkloadUser, "podsafe:workloads")
	add(FencingUser, "podsafe:fencing")
	add(CSIUser, "podsafe:csi")
	add(SchedulerUser)
	add(ControllerManagerUser)
	for _, n := range nodes {
		add(NodeUser(n), "system:nodes")
	}
	return u
}

// get returns the user named name.
func (u *users) get(name string) (User, error) {
	usr, ok := u.byName[name]
	if !ok {
		return User{}, fmt.Errorf("no user %q in the cluster's token file", name)
	}
	return usr, nil
}

// writeTokenFile writes the --token-auth-file CSV: token,user,uid,"groups".
func (u *users) writeTokenFile(path string) error {
	names := make([]string, 0, len(u.byName))
	for n := range u.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		usr := u.byName[n]
		fmt.Fprintf(&b, "%s,%s,%s", usr.Token, usr.Name, usr.Name)
		if len(usr.Groups) > 0 {
			fmt.Fprintf(&b, ",\"%s\"", strings.Join(usr.Groups, ","))
		}
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for user against server, trusting
// the cluster CA.
func writeKubeconfig(path, server string, caPEM []byte, usr User) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["podsafe"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[usr.Name] = &clientcmdapi.AuthInfo{Token: usr.Token}
	cfg.Contexts["podsafe"] = &clientcmdapi.Context{Cluster: "podsafe", AuthInfo: usr.Name}
	cfg.CurrentContext = "podsafe"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
