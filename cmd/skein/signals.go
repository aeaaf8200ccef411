package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// runSignals routes SIGINT and SIGTERM to the runs watching them
// (watchSignals). The process asks for the two signals once, on the
// first run, and never gives them back: every signal.Notify and
// signal.Stop of a signal is a hand-off to a thread the Go runtime keeps
// for signal masks, and the two signal.Stop calls at the end of each run
// cost about 0.6 ms of CPU time, 7% of a `skein run` of a one-line
// script (docs/performance.md, "Start-up").
var runSignals struct {
	once sync.Once
	sigs chan os.Signal
	mu   sync.Mutex
	runs map[*signalRun]struct{}
}

// signalRun is one run watching the signals.
type signalRun struct {
	cancel      context.CancelCauseFunc
	interrupted bool // a first signal has cancelled it
}

// watchSignals cancels a run with errInterrupted on the first SIGINT or
// SIGTERM and exits with status 130 on the second, until stop. A signal
// that comes while no run watches does what it does to a process that
// never asked for it (ends skein, or nothing if it was ignored).
func watchSignals(cancel context.CancelCauseFunc) (stop func()) {
	runSignals.once.Do(func() {
		runSignals.runs = map[*signalRun]struct{}{}
		runSignals.sigs = make(chan os.Signal, 2)
		signal.Notify(runSignals.sigs, os.Interrupt, syscall.SIGTERM)
		go forwardSignals()
	})
	r := &signalRun{cancel: cancel}
	runSignals.mu.Lock()
	runSignals.runs[r] = struct{}{}
	runSignals.mu.Unlock()
	return func() {
		runSignals.mu.Lock()
		delete(runSignals.runs, r)
		runSignals.mu.Unlock()
	}
}

// forwardSignals hands each signal to the runs watching.
func forwardSignals() {
	for sig := range runSignals.sigs {
		runSignals.mu.Lock()
		if len(runSignals.runs) == 0 {
			runSignals.mu.Unlock()
			// as if skein had never asked for it: the default action,
			// or nothing for a signal ignored since skein started
			signal.Reset(sig)
			if self, err := os.FindProcess(os.Getpid()); err != nil || self.Signal(sig) != nil {
				os.Exit(130) // cannot raise it (Windows)
			}
			signal.Notify(runSignals.sigs, sig)
			continue
		}
		again := false
		for r := range runSignals.runs {
			again = again || r.interrupted
			r.interrupted = true
			r.cancel(errInterrupted)
		}
		runSignals.mu.Unlock()
		if again {
			os.Exit(130)
		}
	}
}
