package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of RunOptions.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxOutput = 1 << 20 // bytes per stream
)

// outputGrace is how long Run waits, after the process group is gone, for
// the output pipes to close. A process that left the group (setsid) and
// kept them open does not hold Run up longer than this.
const outputGrace = 2 * time.Second

// RunOptions are the options of Run. The zero value is usable.
type RunOptions struct {
	// Stdin is written to the command's standard input; "" gives it an
	// empty input (/dev/null).
	Stdin string
	// Timeout bounds the run (DefaultTimeout if 0 or negative).
	Timeout time.Duration
	// Env are environment variables added to the minimal inherited
	// environment, overriding it. Each name must be on the policy's
	// environment allowlist (Config.AllowEnv).
	Env map[string]string
	// SecretEnv are environment variables whose values are secrets,
	// revealed only in the command's environment. They override Env and
	// are checked against the allowlist as Env is.
	SecretEnv map[string]Secret
	// Dir is the working directory: "" for Root, otherwise a directory
	// in write scope (a relative path is relative to Root).
	Dir string
	// MaxOutput caps what is kept of stdout and of stderr, each
	// (DefaultMaxOutput if 0 or negative). The rest is read and dropped.
	MaxOutput int
	// Inherit names the variables taken from skein's environment; nil
	// means the usual minimal set (PATH, HOME, the user, the terminal,
	// the locale and a few others, never a secret). Env and SecretEnv
	// come on top either way.
	Inherit []string
}

// RunResult is the outcome of a command that ran.
type RunResult struct {
	// Code is the exit status; 128+n when the command died of signal n;
	// -1 when Run killed it (timeout or cancellation).
	Code int
	// Stdout and Stderr are the captured output, each ending with a
	// "[truncated: N more bytes]" line when it went over MaxOutput.
	Stdout, Stderr string
	// Truncated reports that some output was dropped.
	Truncated bool
	// TimedOut reports that the command was killed at its timeout.
	TimedOut bool
}

// Run executes argv (no shell) in the working directory, after checking
// argv[0] against the command allowlist. An allowlist entry without a
// slash ("go") allows argv[0] written exactly so, resolved in skein's
// PATH (a PATH set in opts.Env affects the command's children, not this
// lookup); an entry with a slash allows exactly that path as written, a
// relative one being relative to the working directory. So "go" does not
// allow "/tmp/go" or "./go": a path could name any binary, one the run
// just wrote included. Nothing runs when the allowlist is empty.
//
// The command gets a minimal environment: PATH, HOME, the locale and a
// few others from skein's environment (never API keys or other secrets),
// plus opts.Env and opts.SecretEnv, whose names must be on the
// environment allowlist and never one of the variables that make a
// loader, shell or interpreter run other code (see Config.AllowEnv). It runs in its own process group,
// which is killed when the command exits (no process it started
// outlives Run, unless it left the group with setsid), when the timeout
// expires (TimedOut, Code -1, a nil error) and when ctx is done (Code -1
// and an error wrapping ctx.Err(), with the output so far). Where there
// are no process groups (Windows) only the command itself is killed. A
// nonzero exit is a result, not an error.
//
// The fs scope does not confine what an allowed command does once
// started; the working directory check is about intent, not a sandbox.
func (p *Policy) Run(ctx context.Context, argv []string, opts RunOptions) (*RunResult, error) {
	cmd, err := p.command(argv, opts)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxOut := opts.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%q not started: %w", argv[0], err)
	}
	// Own the pipes rather than letting exec copy through them, so that
	// Wait returns when the command exits even if a child holds them.
	pp, err := openPipes(cmd, opts.Stdin != "")
	if err != nil {
		return nil, err
	}
	defer pp.close()
	err = cmd.Start()
	pp.closeChildEnds() // the command has its copies
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", argv[0], errorCause(err))
	}
	stdout, stderr := &capped{max: maxOut}, &capped{max: maxOut}
	copied := pp.copy(stdout, stderr, opts.Stdin)

	killed, werr := waitOrKill(ctx, cmd, timeout)
	// Kill what the command left running in its group. (The leader is
	// reaped by now; its id names the group until the group is empty.)
	killGroup(cmd)
	closeFiles(pp.inW) // a writer blocked on a full pipe gives up
	select {
	case <-copied:
	case <-time.After(outputGrace):
		pp.close() // a process that left the group holds the pipes: stop reading
		<-copied
	}

	res := &RunResult{
		Stdout:    stdout.String(),
		Stderr:    stderr.String(),
		Truncated: stdout.dropped > 0 || stderr.dropped > 0,
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return nil, fmt.Errorf("wait for %q: %w", argv[0], werr)
	}
	res.Code = exitCode(cmd.ProcessState)
	if killed {
		res.Code = -1
		if ctx.Err() != nil {
			return res, fmt.Errorf("%q cancelled: %w", argv[0], ctx.Err())
		}
		res.TimedOut = true
	}
	return res, nil
}

// command checks argv and the working directory and environment of opts
// against the policy and returns the command to start (its streams not
// yet set).
func (p *Policy) command(argv []string, opts RunOptions) (*exec.Cmd, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("empty command")
	}
	if err := p.allowCmd(argv[0]); err != nil {
		return nil, err
	}
	dir, err := p.workDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	path, err := p.lookCmd(argv[0], dir)
	if err != nil {
		return nil, err
	}
	env, err := p.commandEnv(opts.Inherit, opts.Env, opts.SecretEnv)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = dir
	cmd.Env = env
	setProcessGroup(cmd)
	return cmd, nil
}

// workDir resolves RunOptions.Dir: Root for "", else a directory in
// write scope.
func (p *Policy) workDir(dir string) (string, error) {
	if dir == "" {
		return p.root, nil
	}
	t, err := p.resolve(dir, accessWrite)
	if err != nil {
		return "", err
	}
	if !t.exists {
		return "", ioError("working directory", t, fs.ErrNotExist)
	}
	if fi, err := os.Stat(t.abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("working directory %q is not a directory", dir)
	}
	return t.abs, nil
}

// pipes are a command's standard streams: the ends Run reads and writes
// (outR, errR, inW) and the ends the command gets (outW, errW, inR). inR
// and inW are nil when the command has no input.
type pipes struct {
	outR, outW, errR, errW, inR, inW *os.File
}

// openPipes makes the pipes of cmd and sets its streams to them.
func openPipes(cmd *exec.Cmd, stdin bool) (*pipes, error) {
	pp := &pipes{}
	var err error
	if pp.outR, pp.outW, err = os.Pipe(); err == nil {
		if pp.errR, pp.errW, err = os.Pipe(); err == nil && stdin {
			pp.inR, pp.inW, err = os.Pipe()
		}
	}
	if err != nil {
		pp.close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pp.outW, pp.errW
	if pp.inR != nil {
		cmd.Stdin = pp.inR
	}
	return pp, nil
}

// closeChildEnds closes the command's ends, once it has started (or
// failed to), so that reading its output ends when the command and its
// children are gone.
func (pp *pipes) closeChildEnds() {
	closeFiles(pp.outW, pp.errW, pp.inR)
}

// close closes every end: the one cleanup, deferred by Run, and how Run
// stops reading output that a process outside the group keeps open.
// Closing an end twice does nothing.
func (pp *pipes) close() {
	closeFiles(pp.outR, pp.outW, pp.errR, pp.errW, pp.inR, pp.inW)
}

// closeFiles closes the files that are not nil.
func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// copy reads the command's output into stdout and stderr and writes
// stdin to its input, in the background; the channel is closed when
// both outputs have ended.
func (pp *pipes) copy(stdout, stderr io.Writer, stdin string) <-chan struct{} {
	var copies sync.WaitGroup
	copies.Go(func() { io.Copy(stdout, pp.outR) })
	copies.Go(func() { io.Copy(stderr, pp.errR) })
	if pp.inW != nil {
		go func() {
			io.WriteString(pp.inW, stdin) // EPIPE if the command does not read it all
			pp.inW.Close()
		}()
	}
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()
	return copied
}

// waitOrKill waits for the started cmd to exit, killing its process
// group when ctx is done or timeout expires (killed is then true).
func waitOrKill(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (killed bool, err error) {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case err = <-waited:
		return false, err
	case <-runCtx.Done():
		killGroup(cmd)
		return true, <-waited
	}
}

func hasPathSep(name string) bool {
	return strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator)
}

// allowCmd checks name (argv[0]) against the allowlist.
func (p *Policy) allowCmd(name string) error {
	hasPath := hasPathSep(name)
	if !slices.Contains(p.cmds, name) {
		switch {
		case len(p.cmds) == 0:
			return refusef("exec "+name, "--allow-cmd", "command %q is not allowed (no commands are allowed; use --allow-cmd)", name)
		case hasPath && slices.Contains(p.cmds, filepath.Base(name)):
			return refusef("exec "+name, "--allow-cmd", "command %q is not allowed (allowed: %s; a command with a path must be allowed as written)", name, strings.Join(p.cmds, ", "))
		}
		return refusef("exec "+name, "--allow-cmd", "command %q is not allowed (allowed: %s)", name, strings.Join(p.cmds, ", "))
	}
	return nil
}

// lookCmd returns the path to run for an allowed name, in directory dir.
func (p *Policy) lookCmd(name, dir string) (string, error) {
	if hasPathSep(name) {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		found, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("command %q: %w", name, errorCause(err))
		}
		return found, nil
	}
	found, err := exec.LookPath(name)
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrDot) {
			return "", fmt.Errorf("command %q resolves to a relative PATH entry; refusing to run it", name)
		}
		return "", fmt.Errorf("command %q not found in PATH", name)
	}
	if err := p.checkWritableCmd(name, found); err != nil {
		return "", err
	}
	return found, nil
}

// checkWritableCmd refuses an allowlisted name that PATH resolves, to
// found, inside the writable workspace: a script or the model can rewrite
// that file (write_file keeps the exec bit), so allowing "pytest" would
// run whatever they wrote to .venv/bin/pytest. Such a command runs only
// when the allowlist names it by its path (--allow-cmd
// ./.venv/bin/pytest). The full tier, where everything is writable, is
// not checked.
func (p *Policy) checkWritableCmd(name, found string) error {
	if p.tier == Full {
		return nil
	}
	real, err := filepath.EvalSymlinks(found)
	if err != nil {
		real = found
	}
	if real, err = filepath.Abs(real); err != nil {
		return err
	}
	rel, err := filepath.Rel(p.root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil // outside the workspace
	}
	for _, c := range p.cmds {
		if !hasPathSep(c) {
			continue
		}
		path := c
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.root, path)
		}
		if r, err := filepath.EvalSymlinks(path); err == nil && r == real {
			return nil // allowed by its path
		}
	}
	return refusef("exec "+name, "--allow-cmd", "command %q resolves in PATH to %s, inside the writable workspace, where a script or the model can rewrite it; to run it, allow it by its path: --allow-cmd ./%s", name, real, filepath.ToSlash(rel))
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	buf     []byte
	max     int
	dropped int64
}

func (c *capped) Write(b []byte) (int, error) {
	n := len(b)
	if room := c.max - len(c.buf); room < len(b) {
		c.dropped += int64(len(b) - max(room, 0))
		b = b[:max(room, 0)]
	}
	c.buf = append(c.buf, b...)
	return n, nil
}

// String returns what was kept, with a truncation marker if anything was
// dropped. A character cut by the cap is dropped too.
func (c *capped) String() string {
	if c.dropped == 0 {
		return string(c.buf)
	}
	buf, dropped := c.buf, c.dropped
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				dropped += int64(len(buf) - i)
				buf = buf[:i]
			}
			break
		}
	}
	return fmt.Sprintf("%s\n[truncated: %d more bytes]", buf, dropped)
}

// Command returns the command that argv would run under the policy,
// checked as Run checks it (the command allowlist, the working
// directory, the environment), without starting it: for a long-lived
// process whose standard streams the caller connects (an external ACP
// agent, an MCP server). It runs in its own process group once started;
// KillGroup stops it with whatever it started.
func (p *Policy) Command(argv []string, opts RunOptions) (*exec.Cmd, error) {
	return p.command(argv, opts)
}

// KillGroup kills the process group of a started command from Command
// (only the process itself where there are no process groups). It does
// nothing when the group is gone.
func KillGroup(cmd *exec.Cmd) {
	killGroup(cmd)
}

// TerminateGroup asks the process group of a started command from
// Command to stop (SIGTERM; where there are no signals, it kills the
// process). It does nothing when the group is gone.
func TerminateGroup(cmd *exec.Cmd) {
	terminateGroup(cmd)
}
