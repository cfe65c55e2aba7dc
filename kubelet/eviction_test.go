package kubelet

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestRankForEviction(t *testing.T) {
	const mi = 1 << 20
	cand := func(name string, usage, request int64, prio int32) EvictionCandidate {
		return EvictionCandidate{Name: name, Usage: usage * mi, Request: request * mi, Priority: prio}
	}
	cases := []struct {
		name string
		in   []EvictionCandidate
		want []string
	}{
		{"within requests are never evicted",
			[]EvictionCandidate{cand("a", 100, 100, 0), cand("b", 50, 200, 0)}, nil},
		{"only those above requests",
			[]EvictionCandidate{cand("a", 100, 100, 0), cand("b", 300, 200, 0)}, []string{"b"}},
		{"lower priority first",
			[]EvictionCandidate{cand("hi", 900, 0, 1000), cand("lo", 101, 100, 10)}, []string{"lo", "hi"}},
		{"same priority: more above requests first",
			[]EvictionCandidate{cand("small", 150, 100, 0), cand("big", 500, 100, 0), cand("mid", 300, 100, 0)},
			[]string{"big", "mid", "small"}},
		{"above requests, not usage, decides",
			[]EvictionCandidate{cand("heavy", 1000, 950, 0), cand("light", 200, 0, 0)}, []string{"light", "heavy"}},
		{"ties by name",
			[]EvictionCandidate{cand("b", 200, 100, 0), cand("a", 200, 100, 0)}, []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range RankForEviction(tc.in) {
				got = append(got, c.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSimRuntimeMemoryUsage(t *testing.T) {
	rt := NewSimRuntime("n", nil, nil)
	defer rt.Close()
	ctx := context.Background()
	start := func(name, script string) ContainerID {
		id, err := rt.Start(ctx, ContainerConfig{UID: "u1", Container: corev1.Container{Name: name},
			Annotations: map[string]string{ScriptAnnotationPrefix + name: script}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	start("a", "mem=200Mi")
	start("b", "mem=1Gi")
	done := start("c", "mem=5Gi run=0s")
	if _, err := rt.Wait(ctx, done); err != nil {
		t.Fatal(err)
	}
	usage, err := rt.MemoryUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, u := range usage {
		total += u.Bytes
	}
	if want := int64(200<<20 + 1<<30); total != want {
		t.Errorf("usage of running containers %d, want %d (%+v)", total, want, usage)
	}
	if _, err := ParseScript("mem=lots"); err == nil {
		t.Errorf("mem=lots parsed")
	}
}
