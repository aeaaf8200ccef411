package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skein-dev/skein/acp"
	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/serve"
	"github.com/skein-dev/skein/telemetry"
)

const serveUsage = "[flags] --agent FILE.star|NAME.agent.yaml|'acp:NAME=COMMAND ARGS...' [--agent ...]"

// serveFlags are the flags of skein serve besides the VM's.
type serveFlags struct {
	addr        string
	agents      agentsFlag
	acpShared   bool
	maxSessions int
	maxRunning  int
	idleTimeout time.Duration
	tokenFile   string
	grace       time.Duration
	maxBody     int64
	poll        time.Duration
	maxStreams  int
	perClient   int
	root        string
	repos       reposFlag
}

// reposFlag is the repeatable --repo ID=PATH.
type reposFlag map[string]string

func (r *reposFlag) String() string {
	ids := make([]string, 0, len(*r))
	for id, p := range *r {
		ids = append(ids, id+"="+p)
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

func (r *reposFlag) Set(v string) error {
	id, path, ok := strings.Cut(v, "=")
	switch {
	case !ok || id == "" || path == "":
		return fmt.Errorf("want ID=PATH, got %q", v)
	case (*r)[id] != "":
		return fmt.Errorf("repository %q is given twice", id)
	}
	if *r == nil {
		*r = reposFlag{}
	}
	(*r)[id] = path
	return nil
}

// flags is the table of serve's own flags.
func (f *serveFlags) flags() []flagDef {
	return []flagDef{
		{name: "addr", value: &f.addr, def: "127.0.0.1:7600", usage: "address to listen on (a non-loopback address needs a token of 16 random bytes or more from --token-file or SKEIN_SERVE_TOKEN)"},
		{name: "agent", value: &f.agents, usage: "an agent: NAME.agent.yaml (an agent file; sessions are bound to it), FILE.star defining handle(session_id, text) (named by the file's stem), or 'acp:NAME=COMMAND ARGS...', an external Agent Client Protocol agent (its command must be allowed by --allow-cmd); repeatable"},
		{name: "acp-shared", value: &f.acpShared, usage: "run one process per external ACP agent for all its sessions, instead of one per session"},
		{name: "max-sessions", value: &f.maxSessions, def: strconv.Itoa(serve.DefaultMaxSessions), env: "AGENT_SESSION_MAX_ACTIVE", usage: "active sessions allowed at once"},
		{name: "max-running", value: &f.maxRunning, usage: "turns allowed to run at once; more prompts wait for a turn to end (0: 4 per core, at least a PostgreSQL store's connection pool)"},
		{name: "idle-timeout", value: &f.idleTimeout, def: serve.DefaultIdleTimeout.String(), env: "AGENT_SESSION_IDLE_TIMEOUT", envUnit: time.Minute,
			usage: "complete a session after this long without activity"},
		{name: "token-file", value: &f.tokenFile, usage: "file holding the bearer token (else SKEIN_SERVE_TOKEN, else a generated one is printed)"},
		{name: "grace", value: &f.grace, def: (30 * time.Second).String(), usage: "on SIGTERM, how long running turns may finish before they are cancelled"},
		{name: "max-body", value: &f.maxBody, def: strconv.FormatInt(serve.DefaultMaxBodyBytes, 10), usage: "largest request body in bytes"},
		{name: "max-streams", value: &f.maxStreams, def: strconv.Itoa(serve.DefaultMaxStreams), usage: "event streams (SSE) open at once; one more is refused with 429"},
		{name: "max-streams-per-client", value: &f.perClient, def: strconv.Itoa(serve.DefaultMaxStreamsPerClient), usage: "event streams (SSE) one client address may have open at once; one more is refused with 429"},
		{name: "workspace-root", value: &f.root, env: "AGENT_WORKSPACE_ROOT",
			usage: "the directory every repository must lie in (default: the workspace, --workspace or the current directory)"},
		{name: "repo", value: &f.repos, usage: "register a repository, ID=PATH (a directory inside the workspace root; relative to the current directory): sessions created with that repoId work in it; registrations are kept in the store; repeatable"},
		{name: "poll-interval", value: &f.poll, def: serve.DefaultPollInterval.String(),
			usage: "how often to look for what other processes sharing the store did (events for SSE streams, cancels of this server's turns, turns a stopped process left behind)"},
	}
}

// serveCommand implements `skein serve`: the session API over HTTP.
func serveCommand(args []string, std stdio) int {
	fs := newFlagSet("serve")
	var vf vmFlags
	vf.register(fs)
	vf.registerStore(fs)
	var f serveFlags
	envErr := registerFlags(fs, f.flags())
	if code, stop := parseFlags(fs, serveUsage, args, std); stop {
		return code
	}
	if err := cmp.Or(envErr, vf.check()); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	switch {
	case fs.NArg() > 0:
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q (agents are given with --agent FILE.star, --agent NAME.agent.yaml or --agent 'acp:NAME=COMMAND ARGS...')", fs.Arg(0)))
	case len(f.agents) == 0:
		return usageError(std, fs.Name(), "no agent: give at least one --agent FILE.star or --agent NAME.agent.yaml")
	case f.maxSessions < 1:
		return usageError(std, fs.Name(), fmt.Sprintf("--max-sessions must be >= 1, got %d", f.maxSessions))
	case f.maxRunning < 0:
		return usageError(std, fs.Name(), fmt.Sprintf("--max-running must be >= 0, got %d", f.maxRunning))
	case f.idleTimeout <= 0:
		return usageError(std, fs.Name(), "--idle-timeout must be positive")
	case f.grace < 0:
		return usageError(std, fs.Name(), "--grace must not be negative")
	case f.maxStreams < 1 || f.perClient < 1:
		return usageError(std, fs.Name(), "--max-streams and --max-streams-per-client must be >= 1")
	case f.maxBody < 1:
		return usageError(std, fs.Name(), "--max-body must be >= 1")
	case f.poll < minPollInterval:
		// a poll every nanosecond burns a core (and the database)
		return usageError(std, fs.Name(), "--poll-interval must be at least "+minPollInterval.String())
	}
	// A served session's turn cap is its own (its agent's), else an
	// explicit --max-turns; without one, served sessions have no cap (a
	// chat goes on for as long as it is used).
	maxTurns := 0
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "max-turns" {
			maxTurns = vf.maxTurns
		}
	})
	if maxTurns == 0 {
		vf.maxTurns = -1
	}
	token, generated, err := serveToken(f.tokenFile)
	if err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	if err := checkServeToken(token, generated, f.addr, f.tokenFile); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	cwd, err := os.Getwd()
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	st, closeVM, err := vf.newState(std, vmConfig{root: cwd, openStore: true})
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	defer closeVM()
	agents := map[string]serve.Agent{}
	logger := slog.New(slog.NewTextHandler(std.err, nil))
	var externals []*acp.External
	defer func() {
		for _, e := range externals {
			e.Shutdown()
		}
	}()
	root := cwd
	if vf.workspace != "" {
		if root, err = filepath.Abs(vf.workspace); err != nil {
			return failState(std, fs.Name(), err)
		}
	}
	for _, file := range f.agents {
		if strings.HasPrefix(file, acpAgentPrefix) {
			e, err := newACPAgent(file, st.Workspace, st.Store, root, f.acpShared, logger)
			if err != nil {
				return usageError(std, fs.Name(), err.Error())
			}
			if _, dup := agents[e.Name()]; dup {
				return usageError(std, fs.Name(), fmt.Sprintf("two agents are named %q", e.Name()))
			}
			agents[e.Name()] = e
			externals = append(externals, e)
			continue
		}
		var name string
		var h serve.Agent
		if isAgentFile(file) {
			ah, err := builtins.NewAgentHandler(st, file)
			if err != nil {
				fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
				return exitUsage
			}
			name, h = ah.Name(), ah
		} else {
			sh, err := st.LoadHandler(file)
			if err != nil {
				fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
				return exitUsage
			}
			name, h = sh.Name(), sh
		}
		if _, dup := agents[name]; dup {
			return usageError(std, fs.Name(), fmt.Sprintf("two agents are named %q (an agent's name is its file's stem, or an agent file's name)", name))
		}
		agents[name] = h
	}
	wsRoot := cmp.Or(f.root, root)
	repos := map[string]string{}
	for id, p := range f.repos {
		if repos[id], err = filepath.Abs(p); err != nil {
			return failState(std, fs.Name(), err)
		}
	}
	tracer := telemetry.FromEnv(std.err)
	defer tracer.Close() // after the turns ended: their last spans are exported
	srv, err := serve.New(serve.Config{Store: st.Store, Agents: agents, Token: token, MaxSessions: f.maxSessions,
		MaxRunning: f.maxRunning, MaxTurns: maxTurns, IdleTimeout: f.idleTimeout, TurnTimeout: vf.timeout, MaxBodyBytes: f.maxBody, PollInterval: f.poll,
		MaxStreams: f.maxStreams, MaxStreamsPerClient: f.perClient, NewID: st.NewID, Logger: logger,
		Tracer: tracer, WorkspaceRoot: wsRoot, Repos: repos, Workspace: st.Workspace})
	if err != nil {
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitFailed
	}
	for _, e := range externals {
		e.OnFailure(srv.AgentFailed)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		srv.Close()
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitFailed
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(std.out, "skein serve: listening on %s (agents: %s)\n", url, strings.Join(agentList(agents), ", "))
	if generated {
		// The generated token is printed once, here, and nowhere else.
		fmt.Fprintf(std.out, "skein serve: token %s\nskein serve: viewer %s/?token=%s\n", token, url, token)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		srv.Close()
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitFailed
	case sig := <-sigs:
		logger.Info("shutting down", "signal", sig.String(), "grace", f.grace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	// Stop accepting and let requests end (SSE streams end with the
	// server's Shutdown below), while turns run on up to the grace period.
	go hs.Shutdown(ctx)
	if err := srv.Shutdown(ctx); err != nil {
		logger.Warn("grace period over: running turns were cancelled and healed")
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	if err := hs.Shutdown(hctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("closing connections", "err", err)
	}
	logger.Info("stopped")
	return exitOK
}

func agentList(agents map[string]serve.Agent) []string {
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// serveToken returns the token: from file, else SKEIN_SERVE_TOKEN, else
// a generated one (generated is then true).
func serveToken(file string) (token string, generated bool, err error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", false, fmt.Errorf("--token-file: %v", underlying(err))
		}
		token = strings.TrimSpace(string(data))
		if token == "" {
			return "", false, fmt.Errorf("--token-file %s is empty", filepath.Base(file))
		}
		return token, false, nil
	}
	if t := strings.TrimSpace(os.Getenv("SKEIN_SERVE_TOKEN")); t != "" {
		return t, false, nil
	}
	return serve.NewToken(), true, nil
}

// checkServeToken refuses a server listening beyond loopback (addr) on
// a generated token (nobody else knows it) or on a weak one: one of
// less than minTokenBits bits by tokenEntropy.
func checkServeToken(token string, generated bool, addr, tokenFile string) error {
	if loopback(addr) {
		return nil
	}
	if generated {
		return fmt.Errorf("refusing to serve on %s, which is not a loopback address, without a token: set one with --token-file or SKEIN_SERVE_TOKEN", addr)
	}
	if bits := tokenEntropy(token); bits < minTokenBits {
		from := "SKEIN_SERVE_TOKEN"
		if tokenFile != "" {
			from = "--token-file"
		}
		return fmt.Errorf("%s: the token has about %d bits of entropy, and serving on %s, which is not a loopback address, needs at least %d (16 random bytes): make one with head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'", from, int(math.Round(bits)), addr, minTokenBits)
	}
	return nil
}

// minTokenBits is the entropy (in bits) a token needs when skein serve
// listens beyond loopback: 16 random bytes.
const minTokenBits = 128

// tokenEntropy estimates the bits of entropy of a token someone chose,
// generously: each character is worth log2 of the alphabet its classes
// span (16 for hex digits; else 26 for lower-case letters, 26 for
// upper-case, 10 for digits and 33 for the rest, added up; at least 62
// with both cases, as base64 need not hold a digit), and a
// repeat of 8 or more characters seen earlier (aaaa..., a word typed
// three times) is worth one character. Dictionary words are not
// recognised: the estimate refuses short, repeated and one-class tokens,
// not every weak one.
func tokenEntropy(tok string) float64 {
	var lower, upper, digit, other, hexOnly = false, false, false, false, true
	for _, c := range tok {
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
			hexOnly = hexOnly && c <= 'f'
		case c >= 'A' && c <= 'Z':
			upper = true
			hexOnly = hexOnly && c <= 'F'
		case c >= '0' && c <= '9':
			digit = true
		default:
			other = true
			hexOnly = false
		}
	}
	alphabet := 0
	switch {
	case hexOnly && !(lower && upper):
		alphabet = 16
	default:
		for _, class := range []struct {
			has  bool
			size int
		}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
			if class.has {
				alphabet += class.size
			}
		}
		if lower && upper {
			alphabet = max(alphabet, 62) // base62 or base64 text need not hold a digit
		}
	}
	if alphabet < 2 {
		return 0
	}
	const minRepeat = 8
	symbols := 0
	for i := 0; i < len(tok); symbols++ {
		longest := 0
		for j := 0; j < i; j++ {
			n := 0
			for i+n < len(tok) && tok[j+n] == tok[i+n] {
				n++
			}
			longest = max(longest, n)
		}
		if longest >= minRepeat {
			i += longest
		} else {
			i++
		}
	}
	return float64(symbols) * math.Log2(float64(alphabet))
}

// loopback reports whether addr (host:port) names only loopback
// interfaces: localhost or a loopback IP. An empty host (all
// interfaces) is not loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// minPollInterval is the shortest --poll-interval skein serve takes.
const minPollInterval = 10 * time.Millisecond
