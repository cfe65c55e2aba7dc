package fencing

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestFenceMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		token  int64
		agents []string
	}{
		{1, []string{"power", "storage"}},
		{9223372036854775807, []string{"ipmi"}},
		{42, nil},
	} {
		msg := fenceMessage(tc.token, tc.agents)
		token, agents, ok := parseFenceMessage(msg)
		if !ok || token != tc.token || !cmp.Equal(agents, tc.agents) {
			t.Errorf("parseFenceMessage(%q) = %d, %v, %v; want %d, %v", msg, token, agents, ok, tc.token, tc.agents)
		}
	}
	if got := fenceMessage(7, []string{"power", "storage"}); got != "fence token 7 confirmed by power,storage" {
		t.Errorf("fenceMessage = %q", got)
	}
	for _, bad := range []string{"", "fenced", "fence token x confirmed by power", "fence token 0 confirmed by power",
		"fence token -3 confirmed by power", "fence token 3"} {
		if _, _, ok := parseFenceMessage(bad); ok {
			t.Errorf("parseFenceMessage(%q) accepted", bad)
		}
	}
}

func TestFenceToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		node   *corev1.Node
		want   int64
		wantOK bool
	}{
		{"nil node", nil, 0, false},
		{"no annotation", makeNode("n").obj(), 0, false},
		{"token", makeNode("n").annotate(AnnotationFenceToken, "12").obj(), 12, true},
		{"garbage", makeNode("n").annotate(AnnotationFenceToken, "twelve").obj(), 0, false},
		{"zero", makeNode("n").annotate(AnnotationFenceToken, "0").obj(), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FenceToken(tc.node)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("FenceToken = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestRecordedFenceOf(t *testing.T) {
	for _, tc := range []struct {
		name       string
		node       *corev1.Node
		wantOK     bool
		wantToken  int64
		wantAgents []string
	}{
		{name: "not fenced", node: makeNode("n").obj()},
		{name: "unfenced", node: makeNode("n").condition(FencedCondition, corev1.ConditionFalse, fenceMessage(3, []string{"power"})).obj()},
		{name: "fenced", node: makeNode("n").fenced(3, "power", "storage").obj(), wantOK: true, wantToken: 3,
			wantAgents: []string{"power", "storage"}},
		{name: "message wins over annotation", node: makeNode("n").fenced(3, "power").annotate(AnnotationFenceToken, "2").obj(),
			wantOK: true, wantToken: 3, wantAgents: []string{"power"}},
		{name: "hand-written message: token from the annotation",
			node:   makeNode("n").condition(FencedCondition, corev1.ConditionTrue, "fenced by hand").annotate(AnnotationFenceToken, "5").obj(),
			wantOK: true, wantToken: 5},
		{name: "hand-written, no token: still fenced",
			node: makeNode("n").condition(FencedCondition, corev1.ConditionTrue, "").obj(), wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf, ok := recordedFenceOf(tc.node)
			if ok != tc.wantOK || rf.token != tc.wantToken || !cmp.Equal(rf.agents, tc.wantAgents) {
				t.Errorf("recordedFenceOf = %+v, %v; want token %d agents %v, %v", rf, ok, tc.wantToken, tc.wantAgents, tc.wantOK)
			}
			if _, licensed := confirmFence(tc.node); licensed != tc.wantOK || Fenced(tc.node) != tc.wantOK {
				t.Errorf("confirmFence/Fenced disagree with recordedFenceOf (%v)", tc.wantOK)
			}
		})
	}
}

// TestSpecRecorded: the spec records a fence only with the TaintFenced taint,
// the cordon and, when the token is known, that token's annotation.
func TestSpecRecorded(t *testing.T) {
	taint := corev1.Taint{Key: TaintFenced, Effect: corev1.TaintEffectNoExecute}
	node := func(token string, tainted, cordoned bool) *corev1.Node {
		b := makeNode("n")
		if token != "" {
			b.annotate(AnnotationFenceToken, token)
		}
		n := b.obj()
		if tainted {
			n.Spec.Taints = []corev1.Taint{taint}
		}
		n.Spec.Unschedulable = cordoned
		return n
	}
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		token int64
		want  bool
	}{
		{"all of it", node("7", true, true), 7, true},
		{"unknown token, taint and cordon", node("", true, true), 0, true},
		{"no taint", node("7", false, true), 7, false},
		{"no cordon", node("7", true, false), 7, false},
		{"neither", node("", false, false), 0, false},
		{"other token", node("6", true, true), 7, false},
		{"no token annotation", node("", true, true), 7, false},
	} {
		if got := specRecorded(tc.node, tc.token); got != tc.want {
			t.Errorf("%s: specRecorded = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFencedTaintNeedsKeyAndEffect: the fence's taint is TaintFenced with
// effect NoExecute; the same key with a milder effect, or another NoExecute
// taint (the node controller's unreachable taint), is not the fence, and a
// cordoned node carrying only one of them is not fenced.
func TestFencedTaintNeedsKeyAndEffect(t *testing.T) {
	node := func(taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true, Taints: taints}}
	}
	fence := corev1.Taint{Key: TaintFenced, Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"the fence's taint", node(fence), true},
		{"the fence's taint after another", node(corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}, fence), true},
		{"the fence's key, NoSchedule", node(corev1.Taint{Key: TaintFenced, Effect: corev1.TaintEffectNoSchedule}), false},
		{"another key, NoExecute", node(corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}), false},
		{"no taint", node(), false},
	} {
		if got := fencedTaint(tc.node) != nil; got != tc.want {
			t.Errorf("%s: fencedTaint found one = %v, want %v", tc.name, got, tc.want)
		}
		if got := specRecorded(tc.node, 0); got != tc.want {
			t.Errorf("%s: specRecorded = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := fencedTaint(node(corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoExecute}, fence)); got == nil || got.Key != TaintFenced {
		t.Errorf("fencedTaint returned %+v, want the fence's taint", got)
	}
}
