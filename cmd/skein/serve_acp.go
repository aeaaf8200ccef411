package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"regexp"
	"strings"
	"sync"

	"github.com/skein-dev/skein/acp"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workspace"
)

// acpAgentPrefix starts an --agent value that names an external ACP
// agent: acp:NAME=COMMAND ARGS...
const acpAgentPrefix = "acp:"

// agentsFlag is serve's repeatable --agent: agent files (a
// comma-separated list, as other list flags) or one external ACP agent
// per value (its command line may hold commas).
type agentsFlag []string

func (a *agentsFlag) String() string { return strings.Join(*a, " ") }

func (a *agentsFlag) Set(v string) error {
	if strings.HasPrefix(v, acpAgentPrefix) {
		*a = append(*a, v)
		return nil
	}
	var files listFlag
	if err := files.Set(v); err != nil {
		return err
	}
	*a = append(*a, files...)
	return nil
}

// agentName is what an external agent may be called (compiled on first
// use: nothing is built at start-up).
var agentName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })

// parseACPAgent reads an --agent acp:NAME=COMMAND ARGS... value.
func parseACPAgent(v string) (name string, argv []string, err error) {
	name, cmdline, ok := strings.Cut(strings.TrimPrefix(v, acpAgentPrefix), "=")
	switch {
	case !ok:
		return "", nil, fmt.Errorf("--agent %s: want acp:NAME=COMMAND ARGS...", v)
	case !agentName().MatchString(name):
		return "", nil, fmt.Errorf("--agent %s: the agent's name %q must be letters, digits, '_', '.' or '-'", v, name)
	}
	if argv, err = splitCommandLine(cmdline); err != nil {
		return "", nil, fmt.Errorf("--agent %s: %v", v, err)
	}
	if len(argv) == 0 {
		return "", nil, fmt.Errorf("--agent %s: no command after %q", v, acpAgentPrefix+name+"=")
	}
	return name, argv, nil
}

// splitCommandLine splits s into words as a POSIX shell does, without
// expansions: blanks separate words; 'single quotes' keep everything;
// "double quotes" keep everything but \" \\ \$ \` (the backslash is
// dropped); a backslash outside quotes keeps the next character.
func splitCommandLine(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("a backslash ends the command line")
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// newACPAgent builds the external agent of an --agent acp:... value.
// Its command must pass the workspace policy (--allow-cmd) now, at
// start; it gets skein's environment variables that --allow-env names.
func newACPAgent(v string, policy *workspace.Policy, store *sessions.Store, cwd string, shared bool, logger *slog.Logger) (*acp.External, error) {
	name, argv, err := parseACPAgent(v)
	if err != nil {
		return nil, err
	}
	command := func(argv []string) (*exec.Cmd, error) {
		return policy.Command(argv, workspace.RunOptions{Env: policy.AllowedEnviron()})
	}
	if _, err := command(argv); err != nil {
		return nil, fmt.Errorf("--agent %s: %v", v, err)
	}
	return acp.NewExternal(acp.ExternalConfig{Name: name, Argv: argv, Command: command, Terminate: workspace.TerminateGroup, Kill: workspace.KillGroup,
		Store: store, Cwd: cwd, Shared: shared, Version: version(), Logger: logger})
}
