package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// interrupts makes Ctrl-C (and SIGTERM) a two-step stop for a command that
// claims it: the first signal closes Stop (a run stops its workload and
// faults and checks what ran), the second cancels the command's context
// (the check is abandoned). A command that does not claim it is cancelled by
// the first signal.
type interrupts struct {
	claimed atomic.Bool
	stop    chan struct{}
	once    sync.Once
	cancel  context.CancelFunc
	out     io.Writer
}

type interruptsKey struct{}

// notifyInterrupts returns a context that the signals cancel as interrupts
// says, carrying the interrupts for commands to claim, and a function that
// stops listening.
func notifyInterrupts(parent context.Context, out io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{stop: make(chan struct{}), cancel: cancel, out: out}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for {
			select {
			case <-sigs:
				in.signal()
			case <-ctx.Done():
				return
			}
		}
	}()
	return context.WithValue(ctx, interruptsKey{}, in), func() {
		signal.Stop(sigs)
		cancel()
	}
}

// signal handles one signal: the first stops a claiming command, every
// other cancels.
func (in *interrupts) signal() {
	first := false
	in.once.Do(func() { first = true })
	if first && in.claimed.Load() {
		fmt.Fprintln(in.out, "podsafe: interrupted: stopping the workload and the faults, then checking what ran (interrupt again to abort the check)")
		close(in.stop)
		return
	}
	in.cancel()
}

// claimInterrupts makes the first interrupt of ctx's command stop it
// gracefully and returns the channel that interrupt closes; nil when ctx
// carries no interrupts (a command run from a test).
func claimInterrupts(ctx context.Context) <-chan struct{} {
	in, ok := ctx.Value(interruptsKey{}).(*interrupts)
	if !ok {
		return nil
	}
	in.claimed.Store(true)
	return in.stop
}
