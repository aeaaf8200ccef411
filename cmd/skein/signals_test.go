//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestSignalsCancelWatchingRuns: SIGINT cancels every run watching the
// signals with errInterrupted, and not a run that stopped watching;
// stopping takes the run out, and a second run reuses the process's one
// registration (start-up: no signal.Stop at the end of a run).
func TestSignalsCancelWatchingRuns(t *testing.T) {
	done, cancelDone := context.WithCancelCause(context.Background())
	stopDone := watchSignals(cancelDone)
	stopDone()
	ctx1, cancel1 := context.WithCancelCause(context.Background())
	stop1 := watchSignals(cancel1)
	defer stop1()
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	stop2 := watchSignals(cancel2)
	defer stop2()
	runSignals.mu.Lock()
	watching := len(runSignals.runs)
	runSignals.mu.Unlock()
	if watching != 2 {
		t.Fatalf("%d runs watching, want 2", watching)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []context.Context{ctx1, ctx2} {
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("SIGINT did not cancel a watching run")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, errInterrupted) {
			t.Fatalf("cause %v, want %v", cause, errInterrupted)
		}
	}
	if done.Err() != nil {
		t.Fatal("SIGINT cancelled a run that had stopped watching")
	}
}

// TestSignalWithNoRunWatching: a SIGTERM that comes after the last run
// stopped watching ends the process as it would one that never asked for
// the signal (it runs this test binary again to see it killed).
func TestSignalWithNoRunWatching(t *testing.T) {
	if os.Getenv("SKEIN_TEST_SIGNAL_CHILD") == "1" {
		_, cancel := context.WithCancelCause(context.Background())
		watchSignals(cancel)() // watched, then stopped
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(30 * time.Second) // killed before this ends
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalWithNoRunWatching$")
	cmd.Env = append(os.Environ(), "SKEIN_TEST_SIGNAL_CHILD=1")
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v", err)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("child ended with %v, want killed by SIGTERM", err)
	}
}
