package mcp

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/skein-dev/skein/workspace"
)

// StopGrace is how long a stopping stdio server has after each step
// (closing its input, SIGTERM) before the next (SIGTERM, SIGKILL).
const StopGrace = 5 * time.Second

// inputGrace is how long a server has to exit by itself once its input
// is closed, before SIGTERM: the protocol's polite shutdown, kept short
// because a run ending waits for it.
const inputGrace = 500 * time.Millisecond

// stderrTail is how much of a server's stderr is kept for the error
// that reports its death.
const stderrTail = 2048

// serverEnv are the variables a stdio server inherits from skein's
// environment besides those the environment allowlist names.
var serverEnv = []string{"PATH", "HOME"}

// process is a running stdio server.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *workspace.Tail
	exited chan struct{} // closed when the process has been waited for
	err    error         // Wait's result, set before exited is closed
}

// startProcess checks spec.Command against the policy and starts it.
func startProcess(policy *workspace.Policy, spec *Spec) (*process, error) {
	env := policy.AllowedEnviron()
	maps.Copy(env, spec.Env)
	cmd, err := policy.Command(spec.Command, workspace.RunOptions{
		Dir: spec.Dir, Env: env, SecretEnv: spec.SecretEnv, Inherit: serverEnv,
	})
	if err != nil {
		return nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdinW, stdout: stdoutR, stderr: &workspace.Tail{Max: stderrTail}, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, p.stderr
	cmd.WaitDelay = time.Second // a child left holding stderr does not hold up Wait
	err = cmd.Start()
	stdinR.Close() // the child has its copies
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, fmt.Errorf("start %q: %w", spec.Command[0], err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitExit waits up to d for the process to exit and returns what
// exitError says, or nil if it is still running.
func (p *process) waitExit(d time.Duration) error {
	select {
	case <-p.exited:
		return p.exitError()
	case <-time.After(d):
		return nil
	}
}

// exitError describes the process's death ("exited (exit status 1);
// stderr: ..."), or nil while it runs.
func (p *process) exitError() error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	status := "exit status 0"
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		status = ee.ProcessState.String()
	} else if p.err != nil {
		status = p.err.Error()
	}
	msg := "exited (" + status + ")"
	if t := strings.TrimSpace(p.stderr.String()); t != "" {
		msg += "; stderr: " + t
	}
	return errors.New(msg)
}

// stop closes the server's input and waits for it to exit; then its
// process group gets SIGTERM and, StopGrace later, SIGKILL. It returns
// once the process is gone.
func (p *process) stop() error {
	p.stdin.Close()
	defer p.stdout.Close()
	for _, step := range []struct {
		wait time.Duration
		stop func(*exec.Cmd)
	}{{inputGrace, workspace.TerminateGroup}, {StopGrace, workspace.KillGroup}} {
		select {
		case <-p.exited:
			workspace.KillGroup(p.cmd) // what it left behind
			return nil
		case <-time.After(step.wait):
			step.stop(p.cmd)
		}
	}
	<-p.exited
	return nil
}
