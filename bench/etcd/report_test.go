package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want spread
	}{
		{nil, spread{}},
		{[]float64{3}, spread{3, 3, 3}},
		{[]float64{5, 1, 3}, spread{1, 3, 5}},
		{[]float64{4, 1, 3, 2}, spread{1, 2.5, 4}},
	} {
		if got := spreadOf(tt.in); got != tt.want {
			t.Errorf("spreadOf(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	if compareVersions("v3.10.0", "v3.7.3") <= 0 || compareVersions("v3.6.16", "v3.7.3") >= 0 || compareVersions("v3.7.3", "v3.7.3") != 0 {
		t.Error("compareVersions does not order numerically")
	}
	if got := etcdVersionOf("/c/podsafe/kube/k8s-v1.37.2_etcd-v3.7.3/bin/etcd"); got != "v3.7.3" {
		t.Errorf("etcdVersionOf = %q", got)
	}
}

func TestProcCPU(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
	}
	after, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after < before {
		t.Errorf("CPU time went back from %v to %v", before, after)
	}
	if self := selfCPU(); self < before {
		t.Errorf("getrusage says %v, /proc said %v before", self, before)
	}
}

// TestSummarize checks the table's ratios: each podsafe round against the
// etcd round it ran beside.
func TestSummarize(t *testing.T) {
	var out bytes.Buffer
	sec := time.Second
	summarize(&out, []string{sysEtcd, sysPodsafeAPI}, []result{
		{system: sysEtcd, round: 0, writes: 1000, wall: sec, cpu: sec},
		{system: sysPodsafeAPI, round: 0, writes: 500, wall: sec, cpu: sec / 2},
		{system: sysEtcd, round: 1, writes: 2000, wall: sec, cpu: sec},
		{system: sysPodsafeAPI, round: 1, writes: 3000, wall: sec, cpu: sec, errors: 2},
	})
	for _, want := range []string{
		"podsafe-api  2       500 / 1750 / 3000",
		"podsafe-api / etcd  0.50× / 1.00× / 1.50×          1.00× / 1.25× / 1.50×",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "kube-api") {
		t.Errorf("a summary without kube-api rounds speaks of it:\n%s", out.String())
	}

	// With kube-api: every system against etcd, and podsafe-api against
	// kube-api round by round.
	out.Reset()
	summarize(&out, []string{sysEtcd, sysKubeAPI, sysPodsafeAPI}, []result{
		{system: sysEtcd, round: 0, writes: 1000, wall: sec, cpu: sec},
		{system: sysKubeAPI, round: 0, writes: 400, wall: sec, cpu: 2 * sec},
		{system: sysPodsafeAPI, round: 0, writes: 500, wall: sec, cpu: sec / 2},
		{system: sysEtcd, round: 1, writes: 2000, wall: sec, cpu: sec},
		{system: sysKubeAPI, round: 1, writes: 1000, wall: sec, cpu: sec},
		{system: sysPodsafeAPI, round: 1, writes: 3000, wall: sec, cpu: sec},
	})
	for _, want := range []string{
		"kube-api / etcd     0.40× / 0.45× / 0.50×          0.20× / 0.35× / 0.50×",
		"ratio to kube-api",
		"podsafe-api / kube-api  1.25× / 2.12× / 3.00×          3.00× / 4.00× / 5.00×",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestNewWorkload(t *testing.T) {
	w := newWorkload(1024)
	if len(w.value) != 1024 {
		t.Errorf("value is %d bytes, want 1024", len(w.value))
	}
	if w.apiPod.Name != "" || w.apiPod.Namespace != benchNamespace {
		t.Errorf("apiPod has name %q, namespace %q", w.apiPod.Name, w.apiPod.Namespace)
	}
}
