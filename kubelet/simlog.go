package kubelet

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// A simulated container runs no process and so writes no output of its
// own; its log is what a person debugging it would want from one: what its
// script does, the probe results as they change, the signals and hooks it
// gets, its writes' failures and its exit, each line stamped with the
// runtime's (scaled) clock. The API server serves it at pods/log.

// LogLine is one line of a simulated container's log.
type LogLine struct {
	Time time.Time
	Text string
}

// maxLogLines bounds a container instance's log: the oldest lines go first,
// as a runtime's log rotation drops them.
const maxLogLines = 1000

// containerLog is one container instance's log.
type containerLog struct {
	mu      sync.Mutex
	lines   []LogLine
	changed chan struct{} // closed and replaced at each append, and closed at the end
	ended   bool
}

func newContainerLog() *containerLog { return &containerLog{changed: make(chan struct{})} }

// add appends a line at t.
func (l *containerLog) add(t time.Time, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if len(l.lines) == maxLogLines {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, LogLine{Time: t, Text: fmt.Sprintf(format, args...)})
	close(l.changed)
	l.changed = make(chan struct{})
}

// end closes the log: the instance exited and writes no more.
func (l *containerLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		close(l.changed)
	}
}

// read returns a copy of the lines, a channel closed at the next change
// (already closed once the log ended) and whether it ended.
func (l *containerLog) read() ([]LogLine, <-chan struct{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LogLine(nil), l.lines...), l.changed, l.ended
}

// ErrNoLog: the runtime has no log of that container instance.
var ErrNoLog = fmt.Errorf("no log of that container")

// ContainerLog returns the log of container of the pod with uid: its
// current instance (running, or the last to exit), or with previous the
// instance before that. more is closed when lines are added or the instance
// ends; ended says it has.
func (r *SimRuntime) ContainerLog(uid, container string, previous bool) (lines []LogLine, more <-chan struct{}, ended bool, err error) {
	r.mu.Lock()
	var cur *simContainer
	for _, c := range r.cs {
		if c.cfg.UID != uid || c.cfg.Container.Name != container {
			continue
		}
		if cur == nil || c.cfg.Attempt > cur.cfg.Attempt || (c.cfg.Attempt == cur.cfg.Attempt && c.seq > cur.seq) {
			cur = c
		}
	}
	r.mu.Unlock()
	switch {
	case cur == nil:
		return nil, nil, false, fmt.Errorf("container %s of pod %s: %w", container, uid, ErrNoLog)
	case previous && cur.previous == nil:
		return nil, nil, false, fmt.Errorf("previous instance of container %s of pod %s: %w", container, uid, ErrNoLog)
	case previous:
		lines, more, ended = cur.previous.read()
	default:
		lines, more, ended = cur.log.read()
	}
	return lines, more, ended, nil
}

// startLine is the first line of an instance's log: what it is and what its
// script will do.
func startLine(cfg *ContainerConfig, s Script) string {
	kind := "container"
	if cfg.Init {
		kind = "init container"
	}
	var does []string
	if s.Forever {
		does = append(does, "runs until stopped")
	} else {
		does = append(does, fmt.Sprintf("runs %s, then exits %d", s.Run, s.Exit))
	}
	switch {
	case s.IgnoreTerm:
		does = append(does, "ignores TERM")
	case s.StopAfterTerm > 0:
		does = append(does, fmt.Sprintf("stops %s after TERM", s.StopAfterTerm))
	}
	switch {
	case s.PreStopHang:
		does = append(does, "its preStop hook hangs")
	case s.HasPreStop:
		does = append(does, fmt.Sprintf("its preStop hook takes %s", s.PreStop))
	}
	if s.LivenessFail > 0 {
		does = append(does, fmt.Sprintf("fails its liveness probe from %s", s.LivenessFail))
	}
	if s.WriteEvery > 0 {
		does = append(does, fmt.Sprintf("writes its volumes every %s", s.WriteEvery))
	}
	return fmt.Sprintf("podsafe simulated %s %s of pod %s/%s started (attempt %d): it %s",
		kind, cfg.Container.Name, cfg.Namespace, cfg.Pod, cfg.Attempt, strings.Join(does, ", "))
}

// signalLine says what a signal does to a container with script s.
func signalLine(sig Signal, grace int64, s Script, stopping bool) string {
	if sig == SignalKill {
		return "received SIGKILL"
	}
	line := fmt.Sprintf("received SIGTERM (grace period %d s)", grace)
	switch {
	case s.IgnoreTerm:
		return line + ": ignoring it"
	case stopping:
		return line + ": already stopping"
	case s.StopAfterTerm > 0:
		return line + fmt.Sprintf(": stopping in %s", s.StopAfterTerm)
	}
	return line + ": stopping"
}
