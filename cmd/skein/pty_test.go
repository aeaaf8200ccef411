//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestREPLInterruptUnderPTY drives `skein repl` on a pseudo-terminal the
// way a person would: Ctrl-C (byte 0x03, which the terminal turns into
// SIGINT while an input runs) cancels a Starlark `while True` loop, an
// agent_loop blocked in a slow mock model call and a blocked sleep(); after
// each the REPL and the session go on working. It also checks Ctrl-C
// while typing, Tab completion, the history file and Ctrl-D.
func TestREPLInterruptUnderPTY(t *testing.T) {
	bin, err := exec.LookPath("skein") // installed on PATH by testscript.Main
	if err != nil {
		t.Skip("skein is not on PATH:", err)
	}
	config := t.TempDir()
	term := startPTY(t, bin, t.TempDir(), config, "repl")

	term.expect(">>> ")
	// Ctrl-C while typing drops the line
	term.send("dropped = 1\x03")
	term.send("dropped\r")
	term.expect(`undefined: dropped`)

	// a top-level while True loop
	// (pasted: one write, whose lines bring their own indentation, so
	// the REPL does not indent them again)
	term.send("n = 0\r")
	term.send("if True:\r    print('spin' + 'ning')\r    while True:\r        n += 1\r\r")
	term.expect(`spinning`)
	time.Sleep(100 * time.Millisecond)
	term.send("\x03")
	term.expect(`Error: Starlark computation cancelled: interrupted`)
	term.expect(">>> ")
	term.send("n > 0\r")
	term.expect(`True`)

	// an agent_loop blocked in a model call that would take a minute
	term.send("llm_mock(text = 'too late', delay_ms = 60000)\r")
	term.send("s = agent_session_open('chat')\r")
	term.send("print('call' + 'ing'); r = agent_loop('hello', provider = 'mock', session_id = s)\r")
	term.expect(`calling`)
	time.Sleep(200 * time.Millisecond)
	term.send("\x03")
	term.expect(`agent_loop: .*interrupted`)
	term.expect(">>> ")
	// the session is usable: the next loop on it runs
	term.send("agent_loop('again', provider = 'mock', session_id = s)['status']\r")
	term.expect(`"done"`)
	term.send(":sessions\r")
	term.expect(`chat\s+\d+\s+\d+\s+active`)

	// a tool blocked in sleep()
	term.send("def slow():\r")
	term.continuation(4)
	term.send("sleep(60)\r") // indented by the REPL
	term.send("\r")
	term.send("llm_mock(tool_calls = [{'name': 'slow'}])\r")
	term.send("print('tool' + 'ing'); agent_loop('go', provider = 'mock', session_id = s, tools = [slow])\r")
	term.expect(`tooling`)
	time.Sleep(200 * time.Millisecond)
	term.send("\x03")
	term.expect(`interrupted`)
	term.expect(">>> ")
	term.send("[m['content'] for m in agent_session_snapshot(s)['messages'] if m['role'] == 'tool']\r")
	term.expect(`\["cancelled"\]`)

	// Tab completes a global
	term.send("unique_answer = 41\r")
	term.send("unique_ans\t + 1\r")
	term.expect(`42`)

	term.send("\x04") // Ctrl-D
	if code := term.wait(); code != 0 {
		t.Fatalf("skein repl exited %d\n%s", code, term.output())
	}
	history, err := os.ReadFile(filepath.Join(config, "skein", "history"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(history), "unique_answer = 41") {
		t.Fatalf("history does not have the inputs:\n%s", history)
	}
}

// TestREPLEditingUnderPTY: an interactive REPL starts with a one-line
// banner (version, :help); continuation lines start indented (deeper
// after a ':', shallower after return), so a block is typed without
// indenting by hand and ended by Enter on the indentation alone (a
// docstring typed line by line too); the
// history holds whole inputs: Up recalls a multi-line for loop as one
// entry (shown with ↵), Enter runs it again, and the next session
// recalls it from the history file.
func TestREPLEditingUnderPTY(t *testing.T) {
	bin, err := exec.LookPath("skein")
	if err != nil {
		t.Skip("skein is not on PATH:", err)
	}
	config, dir := t.TempDir(), t.TempDir()
	term := startPTY(t, bin, dir, config, "repl", "--store", "memory")
	term.expect(`skein \S+ \(go\S+ \w+/\w+\): type :help for help, Ctrl-D to exit\r?\n`)
	term.expect(">>> ")

	// a def: its body is indented for us, deeper after an if, shallower
	// after return (what is echoed after the "... " prompt is the
	// indentation the REPL put there, then what was typed)
	term.send("def double(n):\r")
	term.continuation(4)
	term.send("if n < 0:\r")
	term.expect(`\.\.\. {5}if n < 0:`)
	term.continuation(8)
	term.send("return 0\r")
	term.expect(`\.\.\. {9}return 0`)
	term.continuation(4)
	term.send("return n * 2\r")
	term.expect(`\.\.\. {5}return n \* 2`)
	term.send("\r")
	term.expect(">>> ")
	term.send("double(21)\r")
	term.expect(`\n42\r?\n`)

	// a Google-style docstring typed line by line: its "Args:" does not
	// indent deeper, its blank line does not end the def, and after its
	// closing quotes the body goes on at the docstring's indentation
	term.send("def area(w, h):\r")
	term.continuation(4)
	term.send(`"""The area of a rectangle.` + "\r")
	term.continuation(4)
	term.send("\r")
	term.continuation(4)
	term.send("Args:\r")
	term.continuation(4)
	term.send("    w: the width\r")
	term.continuation(8)
	term.send("h: the height\r")
	term.continuation(8)
	term.send(`"""` + "\r")
	term.continuation(4)
	term.send("return w * h\r")
	term.expect(`\.\.\. {5}return w \* h\r?\n`)
	term.expect(`\.\.\. `) // no indentation after the return
	term.send("\r")
	term.expect(">>> ")
	term.send("area(3, 4)\r")
	term.expect(`\n12\r?\n`)

	// pasted code keeps its own indentation (its lines arrive at once)
	term.send("def triple(n):\r    x = n * 3\r    if x > 0:\r        return x\r    return 0\r\r")
	term.expect(">>> ")
	term.send("triple(5)\r")
	term.expect(`\n15\r?\n`)

	// nested blocks; Enter on a line of indentation alone ends the block
	term.send("for i in range(2):\r")
	term.continuation(4)
	term.send("if i >= 0:\r")
	term.expect(`\.\.\. {5}if i >= 0:`)
	term.continuation(8)
	term.send("print('loop' + str(i))\r")
	term.expect(`\.\.\. {9}print`)
	term.send("\r")
	term.expect(`loop0\r?\nloop1\r?\n`)
	term.expect(">>> ")

	// Up recalls the whole loop as one entry; Enter runs it again
	term.send("\x1b[A")
	term.expect(`for i in range\(2\):↵    if i >= 0:↵        print\('loop' \+ str\(i\)\)`)
	term.send("\r")
	term.expect(`loop0\r?\nloop1\r?\n`)
	term.send("\x04")
	if code := term.wait(); code != 0 {
		t.Fatalf("skein repl exited %d\n%s", code, term.output())
	}
	history, err := os.ReadFile(filepath.Join(config, "skein", "history"))
	if err != nil {
		t.Fatal(err)
	}
	loop := "for i in range(2):\r\n    if i >= 0:\r\n        print('loop' + str(i))\n"
	def := "def double(n):\r\n    if n < 0:\r\n        return 0\r\n    return n * 2\n"
	if !strings.Contains(string(history), def) || !strings.Contains(string(history), loop) {
		t.Fatalf("the history file does not hold the blocks whole:\n%q", history)
	}

	// the next session recalls the loop from the file
	term = startPTY(t, bin, dir, config, "repl", "--store", "memory")
	term.expect(">>> ")
	term.send("\x1b[A")
	term.expect(`↵        print`)
	term.send("\r")
	term.expect(`loop0\r?\nloop1\r?\n`)
	term.send("\x04")
	if code := term.wait(); code != 0 {
		t.Fatalf("skein repl exited %d\n%s", code, term.output())
	}
}

// TestTestProgressLineUnderPTY: on a terminal `skein test` draws a
// progress line, which it clears before results and at the end.
func TestTestProgressLineUnderPTY(t *testing.T) {
	bin, err := exec.LookPath("skein")
	if err != nil {
		t.Skip("skein is not on PATH:", err)
	}
	dir := t.TempDir()
	writeTestTree(t, dir, 3, 7)
	term := startPTY(t, bin, dir, t.TempDir(), "test", "-parallel", "1")
	if code := term.wait(); code != exitFailed {
		t.Fatalf("skein test exited %d\n%s", code, term.output())
	}
	out := term.output()
	for _, want := range []string{"\x1b[Kskein test: 1/21 done, 0 failed", "\x1b[Kskein test: 21/21 done, 6 failed\x1b[K", "\x1b[KFAIL  pkg0/f00_test.star::test_03\n", "12 passed, 6 failed, 3 skipped in "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%q", want, out)
		}
	}
}

// pty is a command running on a pseudo-terminal.
type pty struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	done   chan struct{} // closed when the output has been read to the end

	mu  sync.Mutex
	out []byte
	pos int // where the next expect starts looking
}

// startPTY starts bin with args in dir on a new pseudo-terminal that is
// its controlling terminal, with XDG_CONFIG_HOME set to config.
func startPTY(t *testing.T, bin, dir, config string, args ...string) *pty {
	t.Helper()
	master, slave := openPTY(t)
	defer slave.Close()

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+config, "HOME="+config, "TERM=xterm",
		"SKEIN_PROVIDER=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pty{t: t, master: master, cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out = append(p.out, buf[:n]...)
			p.mu.Unlock()
			if err != nil {
				return // EIO once the command has exited
			}
		}
	}()
	return p
}

// openPTY opens a new pseudo-terminal of 40 rows and 200 columns (the
// test skips where there are none); the test's cleanup closes the master.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminals:", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal("unlockpt:", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal("ptsname:", err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 200}); err != nil {
		t.Fatal("window size:", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// send types s.
func (p *pty) send(s string) {
	p.t.Helper()
	if _, err := p.master.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let readline see keys one batch at a time
}

// continuation waits for the continuation prompt pre-filled with indent
// spaces (drawn, then drawn again: the ESC starts the second drawing) on
// the line after the one typed last, so that the next line is typed
// after it. A line typed ahead would be waiting when the prompt comes,
// and taken for pasted: not indented. (The prompt must follow a newline:
// the previous prompt is redrawn, with the same indentation, until its
// line is entered, and typing after one of those redraws is typing
// ahead.)
func (p *pty) continuation(indent int) {
	p.t.Helper()
	p.expect(`\n[^\n]*?\.\.\. ` + strings.Repeat(" ", indent) + `\x1b\[J`)
}

// expect waits until the output after the previous match matches re.
func (p *pty) expect(re string) {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		loc := rx.FindIndex(p.out[p.pos:])
		if loc != nil {
			p.pos += loc[1]
		}
		p.mu.Unlock()
		if loc != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatalf("no %q in the output after position %d:\n%s", re, p.pos, p.output())
}

func (p *pty) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.ReplaceAll(string(p.out), "\r", "")
}

// wait waits for the command to exit and returns its exit code.
func (p *pty) wait() int {
	p.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	select {
	case <-errc:
	case <-time.After(15 * time.Second):
		p.t.Fatalf("the command did not exit:\n%s", p.output())
	}
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}
