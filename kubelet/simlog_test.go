package kubelet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
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

// The log shown is the highest attempt's, even when an instance of a lower
// attempt started after it.
func TestContainerLogHighestAttempt(t *testing.T) {
	rt := NewSimRuntime("node-1", clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	defer rt.Close()
	ctx := context.Background()
	cfg := ContainerConfig{Namespace: "ns", Pod: "web", UID: "u1", Container: corev1.Container{Name: "app"}, Attempt: 1}
	if _, err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Attempt = 0
	if _, err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// The choice must not hang on the order the runtime's map yields its
	// containers in: ask often enough to see every order.
	for range 100 {
		lines, _, _, err := rt.ContainerLog("u1", "app", false)
		if err != nil || len(lines) != 1 || !strings.Contains(lines[0].Text, "(attempt 1)") {
			t.Fatalf("log %q, %v; want the instance of attempt 1", texts(lines), err)
		}
	}
}

// tickerClock is a fake clock that says when a ticker was made on it.
type tickerClock struct {
	*clocktesting.FakeClock
	made chan struct{}
}

func (c *tickerClock) NewTicker(d time.Duration) clock.Ticker {
	tk := c.FakeClock.NewTicker(d)
	c.made <- struct{}{}
	return tk
}

// scriptedStorage hands each write to the test and answers write n (from 1)
// with errs[n-1].
type scriptedStorage struct {
	writes chan StorageWrite
	errs   []error
}

func (s *scriptedStorage) Write(_ context.Context, w StorageWrite) error {
	s.writes <- w
	return s.errs[w.Seq-1]
}

// A write the storage refused is in the container's log; an accepted one is
// not.
func TestContainerLogWriteFailures(t *testing.T) {
	clk := &tickerClock{FakeClock: clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), made: make(chan struct{}, 1)}
	rt := NewSimRuntime("node-1", clk, nil)
	defer rt.Close()
	st := &scriptedStorage{writes: make(chan StorageWrite), errs: []error{nil, errors.New("boom")}}
	rt.SetStorage(st)
	cfg := ContainerConfig{Namespace: "ns", Pod: "db-0", UID: "u1", Container: corev1.Container{Name: "app"},
		Annotations: map[string]string{ScriptAnnotationPrefix + "app": "write=1s"},
		Volumes:     []AttachedVolume{{Volume: "vol-a", Token: 3}}}
	if _, err := rt.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	<-clk.made
	for seq := int64(1); seq <= 2; seq++ {
		clk.Step(time.Second)
		if w := <-st.writes; w.Seq != seq || w.Volume != "vol-a" || w.Token != 3 {
			t.Fatalf("write %+v, want seq %d to vol-a with token 3", w, seq)
		}
	}
	for {
		lines, more, _, err := rt.ContainerLog("u1", "app", false)
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(lines); strings.Contains(strings.Join(got, "\n"), "write 2 ") {
			if want := []string{"write 2 to volume vol-a failed: boom"}; strings.Join(got[1:], "|") != strings.Join(want, "|") {
				t.Errorf("log after the start line %q, want %q", got[1:], want)
			}
			return
		}
		<-more
	}
}
