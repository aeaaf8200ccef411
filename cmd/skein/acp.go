package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/skein-dev/skein/acp"
	"github.com/skein-dev/skein/builtins"
)

const acpUsage = "[flags] AGENT.star|NAME.agent.yaml"

// acpCommand implements `skein acp AGENT`: the agent speaks the Agent
// Client Protocol on stdin and stdout, for an editor that starts it.
// stdout carries only protocol messages: the script's print output and
// every log line go to stderr.
func acpCommand(args []string, std stdio) int {
	fs := newFlagSet("acp")
	var vf vmFlags
	vf.register(fs)
	vf.registerStore(fs)
	if code, stop := parseFlags(fs, acpUsage, args, std); stop {
		return code
	}
	if err := vf.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	switch {
	case fs.NArg() == 0:
		return usageError(std, fs.Name(), "missing AGENT: an agent file NAME.agent.yaml, or FILE.star defining handle(session_id, text)")
	case fs.NArg() > 1:
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q (one agent per process)", fs.Arg(1)))
	}
	file := fs.Arg(0)
	if _, err := os.Stat(file); err != nil {
		return usageError(std, fs.Name(), fmt.Sprintf("cannot read %s: %v", file, underlying(err)))
	}
	// stdin is the protocol's: the VM reads nothing from it.
	logs := stdio{in: strings.NewReader(""), out: std.err, err: std.err}
	st, closeVM, err := vf.newState(logs, vmConfig{root: filepath.Dir(file), openStore: true})
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	var h interface {
		acp.Handler
		Name() string
	}
	if isAgentFile(file) {
		h, err = builtins.NewAgentHandler(st, file)
	} else {
		h, err = st.LoadHandler(file)
	}
	if err != nil {
		closeVM()
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitUsage
	}
	// Tools an agent lists in approve ask the editor, unless --approve
	// yes or no decides for every call.
	var perms *acp.Permissions
	if vf.approve == "" || vf.approve == "ask" {
		perms = acp.NewPermissions()
		st.Approve = perms.Approve
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The client's MCP servers (session/new) give their session's turns
	// tools, under the run's policy (--allow-cmd, --allow-net,
	// --allow-env).
	err = acp.Serve(ctx, acp.AgentConfig{Store: st.Store, Handler: h, Name: h.Name(), Version: version(), NewID: st.NewID, Logger: logger,
		Permissions: perms, AttachTools: st.AttachTools, Policy: st.Workspace}, std.in, std.out)
	if err != nil {
		closeVM()
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitFailed
	}
	if err := closeVM(); err != nil {
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitFailed
	}
	return exitOK
}
