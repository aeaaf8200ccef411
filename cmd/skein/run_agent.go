package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
)

// agentFlags are the flags of `skein run AGENT.agent.yaml`.
type agentFlags struct {
	prompt  string
	session string
	context string
}

func (f *agentFlags) register(fs *flag.FlagSet) { registerFlags(fs, f.flags()) }

// flags is the table of the agent file flags of skein run.
func (f *agentFlags) flags() []flagDef {
	return []flagDef{
		{name: "prompt", value: &f.prompt, usage: "agent files: the user message of the turn (required)"},
		{name: "session", value: &f.session, usage: "agent files: run on this session, bound to the agent (created when missing; default: a new session)"},
		{name: "context", value: &f.context, usage: "agent files: a JSON file holding the session context (workingDir, activeFile, selection, gitRef, fsScopeTier, variables)"},
	}
}

// set reports whether any agent flag was given.
func (f *agentFlags) set(fs *flag.FlagSet) bool {
	return slices.ContainsFunc(f.flags(), func(d flagDef) bool { return flagSet(fs, d.name) })
}

// isAgentFile reports whether `skein run` treats file as an agent file.
func isAgentFile(file string) bool { return strings.HasSuffix(strings.ToLower(file), agent.FileSuffix) }

// runAgent implements `skein run AGENT.agent.yaml --prompt TEXT`: it
// loads the agent, opens the session (--session, else a new one) bound
// to it with the --context file's context, runs one turn and prints the
// reply; the session's id goes to stderr. It exits 1 when the file is
// invalid, the turn fails or it does not end with status done.
func runAgent(std stdio, vf *vmFlags, af *agentFlags, file string) int {
	const cmd = "skein run"
	if !flagSetNonEmpty(af.prompt) {
		return usageError(std, cmd, "an agent file needs --prompt TEXT")
	}
	var context map[string]any
	if af.context != "" {
		data, err := os.ReadFile(af.context)
		if err != nil {
			return usageError(std, cmd, fmt.Sprintf("--context: %v", err))
		}
		if err := json.Unmarshal(data, &context); err != nil {
			return usageError(std, cmd, fmt.Sprintf("--context %s: want a JSON object of the context keys: %v", af.context, err))
		}
	}
	st, closeVM, err := vf.newState(std, vmConfig{root: filepath.Dir(file)})
	if err != nil {
		return failState(std, cmd, err)
	}
	def, err := builtins.LoadAgent(st, file)
	if err != nil {
		closeVM()
		fmt.Fprintf(std.err, "%s: %s\n", cmd, err)
		return exitFailed
	}
	ctx, stopRun := runContext(vf.timeout, std.err)
	end := st.Begin(ctx)
	thread := st.NewThread("agent")
	vm.SetFile(thread, file)
	res, err := builtins.RunAgent(thread, def, af.session, context, af.prompt)
	st.Release(thread)
	end()
	stopRun()
	closeErr := closeVM()
	if err != nil {
		return scriptFailed(std, vf, err)
	}
	fmt.Fprintln(std.out, res.VisibleText)
	fmt.Fprintf(std.err, "session %s (agent %s)\n", res.SessionID, def.Name)
	if closeErr != nil {
		fmt.Fprintf(std.err, "%s: %v\n", cmd, closeErr)
		return exitFailed
	}
	if res.Status != agent.StatusDone {
		fmt.Fprintf(std.err, "%s: the turn ended with status %s\n", cmd, res.Status)
		return exitFailed
	}
	return exitOK
}
