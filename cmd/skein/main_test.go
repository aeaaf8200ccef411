package main

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite testscript golden files")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"skein": func() { os.Exit(skein(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})) },
	})
}

// TestScripts runs the CLI tests in testscripts/*.txtar.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testscripts",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// sleep DURATION: wait, e.g. for a background command to start
			"sleep": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: sleep DURATION")
				}
				d, err := time.ParseDuration(args[0])
				ts.Check(err)
				time.Sleep(d)
			},
		},
		Setup: func(env *testscript.Env) error {
			// Hermetic: no provider keys or skein settings leak in.
			for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
				"SKEIN_PROVIDER", "SKEIN_STORE", "SKEIN_SESSION_CAP", "SKEIN_OLLAMA_BASE_URL"} {
				env.Setenv(k, "")
			}
			// Sessions end with each command unless a script tests durable
			// ones: it sets SKEIN_STORE (empty for the default) or --store.
			env.Setenv("SKEIN_STORE", "memory")
			// a fake OpenAI-compatible server for provider tests
			fake := newFakeOpenAI(0)
			env.Defer(fake.Close)
			env.Setenv("FAKE_OPENAI_URL", fake.URL+"/v1")
			env.Setenv("FAKE_KEY", fakeKey)
			return nil
		},
	})
}
