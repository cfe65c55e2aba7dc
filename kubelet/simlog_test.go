package kubelet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// texts is the text of each line.
func texts(lines []LogLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}

// A simulated container's log says what its script did, each probe result
// as it changes, the signals it got and how it ended; a restart keeps the
// instance before as the previous log.
func TestContainerLog(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	rt := NewSimRuntime("node-1", clk, nil)
	ctx := context.Background()
	cfg := ContainerConfig{Namespace: "ns", Pod: "web", UID: "u1", Container: corev1.Container{Name: "app"},
		Annotations: map[string]string{ScriptAnnotationPrefix + "app": "ignore-term liveness-fail-at=10s"}}
	if _, _, _, err := rt.ContainerLog("u1", "app", false); !errors.Is(err, ErrNoLog) {
		t.Fatalf("log of a container never started: %v", err)
	}
	id, err := rt.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lines, more, ended, err := rt.ContainerLog("u1", "app", false)
	if err != nil || ended || len(lines) != 1 || !strings.Contains(lines[0].Text, "container app of pod ns/web started (attempt 0): it runs until stopped, ignores TERM, fails its liveness probe from 10s") {
		t.Fatalf("after start: %q ended=%v err=%v", texts(lines), ended, err)
	}
	for range 3 {
		if _, err := rt.Probe(ctx, id, ProbeLiveness); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
	}
	select {
	case <-more:
	default:
		t.Fatal("more was not closed by the first probe's line")
	}
	clk.Step(10 * time.Second)
	if _, err := rt.Probe(ctx, id, ProbeLiveness); err != nil {
		t.Fatal(err)
	}
	if err := rt.Signal(ctx, id, SignalTerm, 30, ""); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	if err := rt.Signal(ctx, id, SignalKill, 30, ""); err != nil {
		t.Fatal(err)
	}
	lines, _, ended, _ = rt.ContainerLog("u1", "app", false)
	want := []string{"liveness probe: Success", "liveness probe: Failure", "received SIGTERM (grace period 30 s): ignoring it",
		"received SIGKILL", "exited with code 137 (Error)"}
	if got := texts(lines)[1:]; strings.Join(got, "|") != strings.Join(want, "|") || !ended {
		t.Errorf("log %q (ended %v), want after the start line %q", got, ended, want)
	}
	if !lines[1].Time.Equal(t0) || !lines[len(lines)-1].Time.Equal(t0.Add(15*time.Second)) {
		t.Errorf("times %s … %s, want the runtime clock's", lines[1].Time, lines[len(lines)-1].Time)
	}
	if _, _, _, err := rt.ContainerLog("u1", "app", true); !errors.Is(err, ErrNoLog) {
		t.Errorf("previous of the first instance: %v", err)
	}

	// The restart: its own log, the exited one as previous.
	cfg.Attempt = 1
	if _, err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cur, _, _, _ := rt.ContainerLog("u1", "app", false)
	prev, _, prevEnded, err := rt.ContainerLog("u1", "app", true)
	if err != nil || len(cur) != 1 || !strings.Contains(cur[0].Text, "(attempt 1)") || !prevEnded || len(prev) != len(lines) {
		t.Errorf("after a restart: current %q, previous %d lines (ended %v, %v)", texts(cur), len(prev), prevEnded, err)
	}
}

// The log keeps its newest lines.
func TestContainerLogBounded(t *testing.T) {
	l := newContainerLog()
	t0 := time.Now()
	for i := range maxLogLines + 5 {
		l.add(t0, "line %d", i)
	}
	lines, _, _ := l.read()
	if len(lines) != maxLogLines || lines[0].Text != "line 5" {
		t.Errorf("%d lines from %q", len(lines), lines[0].Text)
	}
	l.end()
	l.add(t0, "after the end")
	if lines, more, ended := l.read(); len(lines) != maxLogLines || !ended {
		t.Errorf("a line after the end: %d lines, ended %v", len(lines), ended)
	} else {
		select {
		case <-more:
		default:
			t.Error("an ended log's channel is open")
		}
	}
}
