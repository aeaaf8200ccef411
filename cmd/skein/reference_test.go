package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

const cliReferencePath = "../../docs/cli.md"

// cliReference renders docs/cli.md from the commands' own help, so a flag
// added to a command is in the reference as soon as the test is updated.
func cliReference(t *testing.T) string {
	help := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := skein(args, stdio{in: strings.NewReader(""), out: &out, err: &errOut}); code != exitOK && out.Len() == 0 {
			t.Fatalf("skein %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return strings.TrimRight(out.String()+errOut.String(), "\n")
	}
	var b strings.Builder
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("<!-- Generated from the commands' help by `go test ./cmd/skein -run TestCLIReference -update`; do not edit. -->\n\n")
	b.WriteString("Every command prints its flags with `-h` (or `skein help COMMAND`). A flag is written `-name` or `--name`.\n\n")
	fmt.Fprintf(&b, "```\n%s\n```\n", help("help"))
	section := func(title string, args ...string) {
		fmt.Fprintf(&b, "\n## %s\n\n```\n%s\n```\n", title, help(append(args, "-h")...))
	}
	for _, c := range []string{"run", "repl", "test", "eval", "serve", "acp", "mcp"} {
		section("skein "+c, c)
	}
	section("skein sessions", "sessions")
	for _, c := range sessionsCommands() {
		section("skein sessions "+c.name, "sessions", c.name)
	}
	section("skein runs", "runs")
	for _, c := range runsCommands() {
		section("skein runs "+c.name, "runs", c.name)
	}
	fmt.Fprintf(&b, cliFooter, envRows())
	return b.String()
}

// envRows are the rows of the environment table for the flags whose
// default an environment variable gives (the rows of the flag tables
// with an env), sorted by variable.
func envRows() string {
	var rows []string
	for _, t := range flagTables() {
		for _, d := range t.defs {
			if d.env == "" {
				continue
			}
			unset := ""
			if d.def != "" {
				unset = fmt.Sprintf("; unset: `%s`", d.def)
			}
			rows = append(rows, fmt.Sprintf("| `%s` | the default of `--%s` (%s)%s: %s%s |\n",
				d.env, d.name, t.commands, envUnitName(d.envUnit), d.usage, unset))
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "")
}

const cliFooter = `
## Exit codes

| code | meaning |
|---|---|
| 0 | success |
| 1 | a script error, failing tests, or a session store that cannot be opened or written |
| 2 | a usage error: a bad flag or argument, a file that cannot be read |
| 130 | a second Ctrl-C (or SIGTERM) before the first one's cancellation stopped ` + "`skein run`" + `, ` + "`skein test`" + ` or a ` + "`skein repl`" + ` input |

A usage error prints one line, ` + "`skein CMD: problem (see 'skein CMD -h')`" + `; a script
error prints the Starlark traceback, innermost call last, on stderr.

## Common errors

The errors of builtins (a script's errors) are in [agents.md](agents.md#errors-and-what-to-do).
The commands' own:

| error | cause | what to do |
|---|---|---|
| ` + "`skein CMD: ... (see 'skein CMD -h')`" + ` | a usage error (exit 2): a bad flag, value or argument | ` + "`skein CMD -h`" + ` lists the flags; a misspelt flag gets a "did you mean" |
| ` + "`cannot open the session store: ... (--store names another, --store memory runs without one)`" + ` | the ` + "`--store`" + ` database cannot be opened (exit 1): a file that is not a skein database, a directory without write access | point ` + "`--store`" + ` (or ` + "`SKEIN_STORE`" + `) elsewhere, or run with ` + "`--store memory`" + ` |
| ` + "`hint: session 'x' is stored in FILE, perhaps by an earlier run: ...`" + ` | a script creates a session under a fixed id that an earlier run stored | remove it with the ` + "`skein sessions rm`" + ` command the hint gives, pick another id (None mints one) or use ` + "`--store memory`" + ` |
| ` + "`unknown session id 'x' in FILE`" + ` | ` + "`skein sessions show/export/rm`" + ` of an id that FILE does not hold | ` + "`skein sessions ls`" + ` lists the ids; check ` + "`--store`" + ` |
| ` + "`timeout: the run exceeded --timeout D`" + ` | the run took longer than ` + "`--timeout`" + ` | raise ` + "`--timeout`" + `; stored sessions are healed and can be resumed |
| ` + "`llm replay: request N does not match the one recorded at FILE:LINE: ...`" + ` | ` + "`--llm-replay`" + ` (strict mode) got a request other than the one the fixture recorded | the diff says what changed; record the fixture again with the command printed after ` + "`record it again:`" + `, or use ` + "`--llm-replay-mode order`" + ` |
| ` + "`environment variable X=\"v\" is not a valid --flag value`" + ` | a variable of the table below does not parse (exit 2) | fix or unset it |

## Environment variables

| variable | meaning |
|---|---|
%s| ` + "`SKEIN_SERVE_TOKEN`" + ` | the bearer token of ` + "`skein serve`" + ` (and ` + "`skein mcp --addr`" + `) when ` + "`--token-file`" + ` is not given |
| ` + "`SKEIN_OLLAMA_BASE_URL`" + ` | the Ollama server (default ` + "`http://localhost:11434/v1`" + `) |
| provider keys and base URLs | ` + "`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`" + ` and the others of [providers.md](providers.md); read from the environment only, never logged |
| ` + "`OTEL_EXPORTER_OTLP_ENDPOINT`" + ` and the other ` + "`OTEL_*`" + ` variables | export OpenTelemetry traces over OTLP/HTTP (run, repl, test, serve); see [tracing.md](tracing.md) |

A variable that does not parse as its flag's value (` + "`SKEIN_SESSION_CAP=many`" + `) is a usage
error. ` + "`skein test`" + ` ignores ` + "`SKEIN_PROVIDER`" + ` and provider keys: tests are hermetic.
`

// TestCLIReference keeps docs/cli.md in step with the commands' flags.
func TestCLIReference(t *testing.T) {
	envs := []string{"SKEIN_SERVE_TOKEN", "SKEIN_OLLAMA_BASE_URL"}
	for _, t := range flagTables() {
		for _, d := range t.defs {
			if d.env != "" {
				envs = append(envs, d.env)
			}
		}
	}
	for _, k := range envs {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	want := cliReference(t)
	if *update {
		if err := os.WriteFile(cliReferencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(cliReferencePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date; run: go test ./cmd/skein -run TestCLIReference -update", cliReferencePath)
	}
}
