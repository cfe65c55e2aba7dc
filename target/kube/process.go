package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/podsafe/podsafe/target"
)

// proc is one control-plane process: a binary with its arguments, run on a
// host of the cluster's network, writing its output to a log file that
// survives restarts. Kill is SIGKILL (no shutdown path runs), Pause is
// SIGSTOP; Restart runs the same command line again on the same data.
type proc struct {
	name, host string
	path       string
	args       []string
	logPath    string
	command    func(ctx context.Context, host, path string, args ...string) (*exec.Cmd, error)

	// onExit, when set, is told of every exit the harness did not cause
	// (kill and stop cause theirs) and decides whether to start the
	// process again: a control-plane component that exits by itself (a
	// kube-scheduler that lost its leader election exits by design) is
	// restarted, as the kubelet restarts a static pod.
	onExit func(p *proc, err error)

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current process has exited
	exitErr  error
	paused   bool
	starts   int
	expected bool // the current process is being killed or stopped
	closed   bool // stop ran: never start again
}

// start starts the process. It fails if it is already running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("%s: the cluster is closed", p.name)
	}
	if p.cmd != nil {
		return fmt.Errorf("%s (pid %d): %w", p.name, p.cmd.Process.Pid, target.ErrRunning)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the log of %s: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "\n==== podsafe: starting %s (start %d) at %s ====\n", p.name, p.starts+1, time.Now().UTC().Format(time.RFC3339Nano))
	// The process outlives any request's context: it is stopped by kill or
	// stop only.
	cmd, err := p.command(context.Background(), p.host, p.path, p.args...)
	if err != nil {
		logFile.Close()
		return fmt.Errorf("preparing %s: %w", p.name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A harness that dies takes its processes with it: nothing is left
	// running behind a killed podsafe.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.cmd, p.paused, p.expected = cmd, false, false
	p.starts++
	done := make(chan struct{})
	p.done = done
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "\n==== podsafe: %s exited (%v) at %s ====\n", p.name, err, time.Now().UTC().Format(time.RFC3339Nano))
		logFile.Close()
		p.mu.Lock()
		unexpected := false
		if p.cmd == cmd {
			unexpected = !p.expected && !p.closed
			p.cmd, p.exitErr, p.paused = nil, err, false
		}
		p.mu.Unlock()
		close(done)
		if unexpected && p.onExit != nil {
			p.onExit(p, err)
		}
	}()
	return nil
}

// running reports whether the process is running (a paused one is).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) (<-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil, fmt.Errorf("%s: %w", p.name, target.ErrNotRunning)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return nil, fmt.Errorf("signalling %s with %s: %w", p.name, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return p.done, nil
}

// resume continues a paused process.
func (p *proc) resume() error {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if !paused {
		return fmt.Errorf("%s: %w", p.name, target.ErrNotPaused)
	}
	_, err := p.signal(syscall.SIGCONT)
	return err
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill(ctx context.Context) error {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
	done, err := p.signal(syscall.SIGKILL)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s to die: %w", p.name, ctx.Err())
	}
}

// stop asks the process to end (SIGTERM, resuming it first if paused) and
// kills it if it has not ended after grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	paused := p.paused
	p.expected, p.closed = true, true
	p.mu.Unlock()
	if paused {
		p.signal(syscall.SIGCONT) //nolint:errcheck // it may have just exited
	}
	done, err := p.signal(syscall.SIGTERM)
	if err != nil {
		return
	}
	select {
	case <-done:
	case <-time.After(grace):
		if done, err := p.signal(syscall.SIGKILL); err == nil {
			<-done
		}
	}
}

// pid is the running process's id (0 when not running).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// lastExit is the exit error of the last process that ended (nil: none
// ended, or it exited 0).
func (p *proc) lastExit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}
