package kube

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Ports of the control plane. Every process has an address of its own, so
// every process uses its component's usual port.
const (
	EtcdClientPort        = 2379
	EtcdPeerPort          = 2380
	APIServerPort         = 6443
	SchedulerPort         = 10259
	ControllerManagerPort = 10257
)

// serviceCIDR is the service cluster IP range; serviceIP its first address
// (the kubernetes service), which the serving certificate names.
const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

// layout is where everything of one cluster is: addresses and files. The
// command lines are pure functions of it.
type layout struct {
	dir     string
	runID   string
	etcd    []netip.Addr
	api     []netip.Addr
	pki     *pki
	tokens  string // token file
	policy  string // audit policy file
	timings Timings
	// noPreemption: the schedulers run with a configuration file that
	// disables DefaultPreemption.
	noPreemption bool
}

func etcdName(i int) string              { return fmt.Sprintf("etcd-%d", i) }
func apiServerName(i int) string         { return fmt.Sprintf("kube-apiserver-%d", i) }
func schedulerName(i int) string         { return fmt.Sprintf("kube-scheduler-%d", i) }
func controllerManagerName(i int) string { return fmt.Sprintf("kube-controller-manager-%d", i) }

func hostport(a netip.Addr, port int) string {
	return netip.AddrPortFrom(a, uint16(port)).String()
}

// etcdURLs lists every member's client URL.
func (l *layout) etcdURLs() string {
	urls := make([]string, len(l.etcd))
	for i, a := range l.etcd {
		urls[i] = "https://" + hostport(a, EtcdClientPort)
	}
	return strings.Join(urls, ",")
}

// apiURL is API server i's URL.
func (l *layout) apiURL(i int) string { return "https://" + hostport(l.api[i], APIServerPort) }

// auditLog is API server i's audit log.
func (l *layout) auditLog(i int) string {
	return filepath.Join(l.dir, "audit", apiServerName(i)+".log")
}

// etcdArgs is member i's command line: TLS for clients and peers, both
// required to present a certificate of the cluster CA. A restarted member
// finds its data directory and ignores the initial-cluster flags.
func (l *layout) etcdArgs(i int) []string {
	name := etcdName(i)
	var initial []string
	for j, a := range l.etcd {
		initial = append(initial, fmt.Sprintf("%s=https://%s", etcdName(j), hostport(a, EtcdPeerPort)))
	}
	addr := l.etcd[i]
	return []string{
		"--name=" + name,
		"--data-dir=" + filepath.Join(l.dir, "data", name),
		"--listen-client-urls=https://" + hostport(addr, EtcdClientPort),
		"--advertise-client-urls=https://" + hostport(addr, EtcdClientPort),
		"--listen-peer-urls=https://" + hostport(addr, EtcdPeerPort),
		"--initial-advertise-peer-urls=https://" + hostport(addr, EtcdPeerPort),
		"--cert-file=" + l.pki.EtcdCert[i],
		"--key-file=" + l.pki.EtcdKey[i],
		"--trusted-ca-file=" + l.pki.CAFile,
		"--client-cert-auth=true",
		"--peer-cert-file=" + l.pki.EtcdCert[i],
		"--peer-key-file=" + l.pki.EtcdKey[i],
		"--peer-trusted-ca-file=" + l.pki.CAFile,
		"--peer-client-cert-auth=true",
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=new",
		"--initial-cluster-token=podsafe-" + l.runID,
		"--log-level=warn",
	}
}

// apiServerArgs is API server i's command line: TLS, static tokens, the
// Node authorizer before RBAC and the NodeRestriction admission plugin as
// real clusters run, an audit log, and the shortened toleration seconds.
func (l *layout) apiServerArgs(i int) []string {
	a := l.api[i]
	return []string{
		"--advertise-address=" + a.String(),
		"--bind-address=" + a.String(),
		"--secure-port=" + strconv.Itoa(APIServerPort),
		"--etcd-servers=" + l.etcdURLs(),
		"--etcd-cafile=" + l.pki.CAFile,
		"--etcd-certfile=" + l.pki.EtcdClientCert,
		"--etcd-keyfile=" + l.pki.EtcdClientKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + l.pki.ServingCert,
		"--tls-private-key-file=" + l.pki.ServingKey,
		"--client-ca-file=" + l.pki.CAFile,
		"--token-auth-file=" + l.tokens,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-key-file=" + l.pki.SAPub,
		"--service-account-signing-key-file=" + l.pki.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--requestheader-client-ca-file=" + l.pki.FrontProxyCA,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--audit-policy-file=" + l.policy,
		"--audit-log-path=" + l.auditLog(i),
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
		"--audit-log-maxbackup=0",
		"--default-not-ready-toleration-seconds=" + strconv.Itoa(l.timings.NotReadyToleration),
		"--default-unreachable-toleration-seconds=" + strconv.Itoa(l.timings.UnreachableToleration),
		"--profiling=false",
		"--v=1",
	}
}

// leaderElectArgs: leader election when a component runs more than once.
func (l *layout) leaderElectArgs() []string {
	if len(l.api) == 1 {
		return []string{"--leader-elect=false"}
	}
	return []string{
		"--leader-elect=true",
		"--leader-elect-lease-duration=" + l.timings.LeaderElectLease.D().String(),
		"--leader-elect-renew-deadline=" + l.timings.LeaderElectRenew.D().String(),
		"--leader-elect-retry-period=" + l.timings.LeaderElectRetry.D().String(),
	}
}

// kubeconfigPath is the kubeconfig file of a component.
func (l *layout) kubeconfigPath(name string) string {
	return filepath.Join(l.dir, "kubeconfig", name+".kubeconfig")
}

// schedulerConfigPath is scheduler i's KubeSchedulerConfiguration file,
// written only when the layout disables preemption.
func (l *layout) schedulerConfigPath(i int) string {
	return filepath.Join(l.dir, "kube-scheduler-config-"+strconv.Itoa(i)+".yaml")
}

// schedulerConfig is scheduler i's KubeSchedulerConfiguration with the
// DefaultPreemption post-filter disabled. A configuration file replaces the
// deprecated --kubeconfig flag, so it names the kubeconfig itself; the
// leader election flags still apply.
func (l *layout) schedulerConfig(i int) []byte {
	return []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ` + strconv.Quote(l.kubeconfigPath(schedulerName(i))) + `
profiles:
- schedulerName: default-scheduler
  plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
`)
}

// schedulerArgs is scheduler i's command line; it talks to API server i.
func (l *layout) schedulerArgs(i int, addr netip.Addr) []string {
	kc := l.kubeconfigPath(schedulerName(i))
	var config []string
	if l.noPreemption {
		config = []string{"--config=" + l.schedulerConfigPath(i)}
	}
	return append(append(config,
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--bind-address="+addr.String(),
		"--secure-port="+strconv.Itoa(SchedulerPort),
		"--v=1",
	), l.leaderElectArgs()...)
}

// controllerManagerArgs is controller-manager i's command line; it talks
// to API server i, each controller with its own service account as real
// clusters run it (so the audit log names the StatefulSet controller, the
// node lifecycle controller, pod GC...).
func (l *layout) controllerManagerArgs(i int, addr netip.Addr) []string {
	kc := l.kubeconfigPath(controllerManagerName(i))
	t := l.timings
	return append([]string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=" + addr.String(),
		"--secure-port=" + strconv.Itoa(ControllerManagerPort),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + l.pki.SAKey,
		"--root-ca-file=" + l.pki.CAFile,
		"--node-monitor-period=" + t.NodeMonitorPeriod.D().String(),
		"--node-monitor-grace-period=" + t.NodeMonitorGracePeriod.D().String(),
		"--terminated-pod-gc-threshold=" + strconv.Itoa(t.TerminatedPodGCThreshold),
		"--v=1",
	}, l.leaderElectArgs()...)
}
