package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skein-dev/skein/vm"
)

const runUsage = "[flags] FILE [ARGS...] | [flags] FLOW.yaml --task TEXT | [flags] AGENT.agent.yaml --prompt TEXT"

// runCommand implements `skein run FILE [ARGS...]`: it executes FILE with
// ARGS as argv; print goes to stdout, the error traceback to stderr.
func runCommand(args []string, std stdio) int {
	fs := newFlagSet("run")
	var vf vmFlags
	vf.register(fs)
	vf.registerStore(fs)
	vf.registerEventLog(fs)
	vf.registerTrace(fs)
	var wf workflowFlags
	wf.register(fs)
	var af agentFlags
	af.register(fs)
	if code, stop := parseFlags(fs, runUsage, args, std); stop {
		return code
	}
	if fs.NArg() > 0 && isAgentFile(fs.Arg(0)) {
		file := fs.Arg(0)
		// flags may follow the file: skein run x.agent.yaml --prompt TEXT
		if code, stop := parseFlags(fs, runUsage, fs.Args()[1:], std); stop {
			return code
		}
		if fs.NArg() > 0 {
			return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q after the agent file", fs.Arg(0)))
		}
		if wf.set(fs) {
			return usageError(std, fs.Name(), "--task, --run-id, --max-stages and --json are for workflow files (FLOW.yaml)")
		}
		if err := vf.check(); err != nil {
			return usageError(std, fs.Name(), err.Error())
		}
		return runAgent(std, &vf, &af, file)
	}
	if af.set(fs) {
		return usageError(std, fs.Name(), "--prompt, --session and --context are for agent files (AGENT.agent.yaml)")
	}
	if fs.NArg() > 0 && isWorkflowFile(fs.Arg(0)) {
		file := fs.Arg(0)
		// flags may follow the file: skein run flow.yaml --task TEXT
		if code, stop := parseFlags(fs, runUsage, fs.Args()[1:], std); stop {
			return code
		}
		if fs.NArg() > 0 {
			return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q after the workflow file", fs.Arg(0)))
		}
		if err := vf.check(); err != nil {
			return usageError(std, fs.Name(), err.Error())
		}
		return runWorkflow(std, &vf, &wf, file)
	}
	if wf.set(fs) {
		return usageError(std, fs.Name(), "--task, --run-id, --max-stages and --json are for workflow files (FLOW.yaml)")
	}
	if err := vf.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	if fs.NArg() == 0 {
		return usageError(std, fs.Name(), "missing FILE to run")
	}
	file := fs.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return usageError(std, fs.Name(), fmt.Sprintf("cannot read %s: %v", file, underlying(err)))
	}
	argv := scriptArgs(fs, std)
	st, closeVM, err := vf.newState(std, vmConfig{root: filepath.Dir(file), args: argv,
		rerecord: func(extra []string) string { return rerecordCommand(fs, vf.replay, extra) }})
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	ctx, stopRun := runContext(vf.timeout, std.err)
	end := st.Begin(ctx)
	_, err = st.ExecFile(file, src)
	end()
	stopRun()
	closeErr := closeVM()
	if err != nil {
		return scriptFailed(std, &vf, err)
	}
	if closeErr != nil {
		fmt.Fprintf(std.err, "skein run: %v\n", closeErr)
		return exitFailed
	}
	return exitOK
}

// scriptFailed prints a run's error (the innermost backtrace) and a hint
// about the store if it has one, and returns the exit code.
func scriptFailed(std stdio, vf *vmFlags, err error) int {
	fmt.Fprintln(std.err, vm.FormatError(err))
	if h := vf.store.hint(err); h != "" {
		fmt.Fprintln(std.err, h)
	}
	return exitFailed
}

// scriptArgs returns the arguments after FILE, the script's argv. Flags
// end at FILE, so "skein run x.star --store memory" passes --store to the
// script: a skein flag there gets a warning. A "--" right after FILE is
// dropped and silences the warning: "skein run x.star -- --verbose".
func scriptArgs(fs *flag.FlagSet, std stdio) []string {
	argv := fs.Args()[1:]
	if len(argv) > 0 && argv[0] == "--" {
		return argv[1:]
	}
	for _, a := range argv {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name != "" && fs.Lookup(name) != nil {
			fmt.Fprintf(std.err, "%s: warning: %s comes after FILE, so it is passed to the script in argv, not read by skein (put flags before FILE; use -- after FILE to pass flag-like arguments to the script without this warning)\n", fs.Name(), a)
		}
	}
	return argv
}

// underlying strips the operation and path from a *PathError.
func underlying(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
