package kube

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/target"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// TestStorageFenceAgent: the storage fence agent needs the storage server,
// and with it refuses the fenced node's writes until unfenced, naming the
// node by the address its writes come from.
func TestStorageFenceAgent(t *testing.T) {
	fake := binaries.Paths{Etcd: "etcd", KubeAPIServer: "kube-apiserver", KubeScheduler: "kube-scheduler", KubeControllerManager: "kube-controller-manager"}
	c, err := New(Config{Dir: t.TempDir(), Binaries: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.FenceAgent(FenceAgentStorage); !errors.Is(err, ErrNoStorage) {
		t.Fatalf("storage agent without storage: %v, want ErrNoStorage", err)
	}
	if err := (FencingOptions{Agents: []string{"bmc"}}).validate(); err == nil || !strings.Contains(err.Error(), "storage") {
		t.Errorf("an unknown agent: %v, want the known agents named", err)
	}

	// A storage server as StartStorage runs it, on loopback: node-1's
	// kubelet writes from 127.0.0.1.
	c.hosts["node-1"] = netipLoopback()
	c.comps = append(c.comps, target.Component{Name: KubeletComponent("node-1"), Role: target.RoleKubelet, Host: "node-1", Node: "node-1"})
	c.kl = &kubelets{fenced: map[fenceKey]bool{}, fenceCuts: map[string]func() error{}, specs: map[string]NodeSpec{"node-1": {Name: "node-1"}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var entries []kubelet.LedgerEntry
	srvLedger := kubelet.LedgerFunc(func(e kubelet.LedgerEntry) { entries = append(entries, e) })
	st := &storageState{ln: ln, addr: ln.Addr().String(), cancel: func() {}, done: make(chan struct{})}
	close(st.done)
	st.srv = newStorageServer(srvLedger, c)
	go st.srv.Serve(ln)
	c.storage = st
	defer c.stopStorage()

	agent, err := c.FenceAgent(FenceAgentStorage)
	if err != nil {
		t.Fatal(err)
	}
	client := c.storageClient("node-1")
	ctx := context.Background()
	w := kubelet.StorageWrite{Volume: "default.data-pet-0", Pod: "pet-0", UID: "u1", Container: "c", Token: 3}
	if err := client.Write(ctx, w); err != nil {
		t.Fatalf("write before the fence: %v", err)
	}
	if err := agent.Fence(ctx, "node-1", 7); err != nil {
		t.Fatal(err)
	}
	if !c.Fenced("node-1") {
		t.Error("node-1 not reported fenced")
	}
	if err := client.Write(ctx, w); err == nil {
		t.Error("the storage accepted a write of the fenced node")
	}
	if err := agent.Unfence(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	if err := client.Write(ctx, w); err != nil {
		t.Errorf("write after the unfence: %v", err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Node+":"+string(e.Action))
	}
	want := []string{"node-1:" + string(kubelet.ActionWrite), "node-1:" + string(kubelet.ActionWriteRefused), "node-1:" + string(kubelet.ActionWrite)}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("storage ledger %v, want %v (the writer named by its address)", got, want)
	}
}

func netipLoopback() netip.Addr { return netip.MustParseAddr("127.0.0.1") }
