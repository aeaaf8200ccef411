package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowAgent answers a prompt with a tool call whose tool sleeps for the
// number of seconds the prompt says, then with text.
const slowAgent = `
def work(seconds):
    """Works for a while.

    Args:
      seconds: how long.
    """
    sleep(seconds)
    return "worked %s s" % seconds

def handle(session_id, text):
    # The mock's queue is shared by every session: match this one's requests.
    system = "You serve session " + session_id + "."
    mine = "*" + system + "*"
    llm_mock(tool_calls = [{"name": "work", "arguments": {"seconds": float(text)}}], match = mine, consume_match = True)
    llm_mock(text = "done after " + text, match = mine, consume_match = True)
    agent_loop(text, system = system, provider = "mock", session_id = session_id, tools = [work])
`

// serveProcess is a skein serve child process.
type serveProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, once done is closed
}

// startServe starts skein serve in dir on a free port with the slow agent.
func startServe(t *testing.T, dir string, args ...string) *serveProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := os.WriteFile(filepath.Join(dir, "slow.star"), []byte(slowAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(skeinBinary(t), append([]string{"serve", "--store", "sessions.db", "--addr", addr, "--agent", "slow.star"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SKEIN_SERVE_TOKEN=tok", "SKEIN_STORE=")
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{t: t, cmd: cmd, url: "http://" + addr, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log("serve: " + sc.Text())
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.done })
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("skein serve did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func (p *serveProcess) call(method, path, body string, want int) map[string]any {
	p.t.Helper()
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		p.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	var out map[string]any
	json.Unmarshal(data, &out)
	return out
}

// waitToolCall waits until the session's last message calls a tool (the
// turn is in its tool).
func (p *serveProcess) waitToolCall(id string) {
	p.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		msgs := p.call("GET", "/api/sessions/"+id+"/messages", "", 200)["messages"].([]any)
		if n := len(msgs); n > 0 && msgs[n-1].(map[string]any)["toolCalls"] != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("session %s never reached its tool call", id)
}

func roles(s map[string]any) string {
	var out []string
	for _, m := range s["messages"].([]any) {
		m := m.(map[string]any)
		r := m["role"].(string)
		if m["isError"] == true {
			r += "!"
		}
		out = append(out, r)
	}
	return strings.Join(out, ",")
}

// TestServeKilledMidTurn: SIGKILL while turns are in their tools; after a
// restart every session is healed and active, the acknowledged prompts
// are there, the active count is restored and the sessions take prompts.
func TestServeKilledMidTurn(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, dir, "--max-sessions", "3")
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		p.call("POST", "/api/sessions", `{"id": "`+id+`"}`, 201)
		p.call("POST", "/api/sessions/"+id+"/prompt", `{"text": "30"}`, 202)
	}
	for _, id := range ids {
		p.waitToolCall(id)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done

	q := startServe(t, dir, "--max-sessions", "3")
	for _, id := range ids {
		s := q.call("GET", "/api/sessions/"+id, "", 200)
		if s["status"] != "active" || roles(s) != "user,assistant,tool!" {
			t.Fatalf("session %s after the crash: %s %s", id, s["status"], roles(s))
		}
		if first := s["messages"].([]any)[0].(map[string]any); first["content"] != "30" {
			t.Fatalf("session %s lost its prompt: %v", id, first)
		}
	}
	q.call("POST", "/api/sessions", `{}`, 429) // the three are still active
	q.call("POST", "/api/sessions/a/prompt", `{"text": "0"}`, 202)
	deadline := time.Now().Add(time.Minute)
	for {
		s := q.call("GET", "/api/sessions/a", "", 200)
		if s["running"] == false {
			if roles(s) != "user,assistant,tool!,user,assistant,tool,assistant" {
				t.Fatalf("after a new turn: %s", roles(s))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new turn did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeGracefulShutdown: SIGTERM lets a short turn finish and exits
// 0; a turn longer than --grace is cancelled and healed, and the exit is
// still 0.
func TestServeGracefulShutdown(t *testing.T) {
	for _, c := range []struct {
		grace, seconds string
		want           string
	}{
		{"30s", "0.5", "user,assistant,tool,assistant"},
		{"200ms", "30", "user,assistant,tool!"},
	} {
		t.Run("grace "+c.grace, func(t *testing.T) {
			dir := t.TempDir()
			p := startServe(t, dir, "--grace", c.grace)
			p.call("POST", "/api/sessions", `{"id": "s"}`, 201)
			p.call("POST", "/api/sessions/s/prompt", `{"text": "`+c.seconds+`"}`, 202)
			p.waitToolCall("s")
			start := time.Now()
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
				if p.err != nil {
					t.Fatalf("skein serve exited with %v after SIGTERM", p.err)
				}
			case <-time.After(time.Minute):
				t.Fatal("skein serve did not exit after SIGTERM")
			}
			if secs, _ := strconv.ParseFloat(c.seconds, 64); secs > 10 && time.Since(start) > 20*time.Second {
				t.Fatalf("shutdown took %s with --grace %s", time.Since(start), c.grace)
			}
			q := startServe(t, dir)
			s := q.call("GET", "/api/sessions/s", "", 200)
			if s["status"] != "active" || roles(s) != c.want {
				t.Fatalf("after shutdown: %s %s, want %s", s["status"], roles(s), c.want)
			}
		})
	}
}
