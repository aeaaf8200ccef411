package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

var update = flag.Bool("update", false, "rewrite testscript golden files")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"skein": func() {
			os.Exit(childProfiled(func() int { return skein(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}) }))
		},
	})
}

// TestScripts runs the CLI tests in testscripts/*.txtar.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testscripts",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Condition: func(cond string) (bool, error) {
			if cond == "postgres" {
				return pgtest.Available(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: withServeCmds(map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// pgstore [-bare]: make a new schema in the PostgreSQL test
			// database (SKEIN_TEST_POSTGRES; guard with [!postgres]
			// skip), migrated as `skein migrate` would unless -bare,
			// dropped when the script ends; $PGSTORE is its URL and
			// $PGSTORE_PASSWORD the password in it, which no output may
			// show
			"pgstore": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) > 1 || len(args) == 1 && args[0] != "-bare" {
					ts.Fatalf("usage: pgstore [-bare]")
				}
				dsn, drop, err := pgtest.NewSchema()
				ts.Check(err)
				ts.Defer(func() { ts.Check(drop()) })
				if len(args) == 0 {
					_, err := postgres.Migrate(context.Background(), dsn)
					ts.Check(err)
				}
				u, err := url.Parse(dsn)
				ts.Check(err)
				password, _ := u.User.Password()
				ts.Setenv("PGSTORE", dsn)
				ts.Setenv("PGSTORE_PASSWORD", password)
			},
			// waitfile FILE REGEXP: wait (up to a minute) until FILE exists
			// and its content matches REGEXP, e.g. for a background
			// command to say it has started; a fixed sleep is flaky on a
			// loaded machine
			// cmpnotime stdout|stderr|FILE GOLDEN: cmp, with every
			// duration in seconds (0.012s, 1.50s) written N.NNs first,
			// for reports that say how long things took
			"cmpnotime": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: cmpnotime stdout|stderr|FILE GOLDEN")
				}
				got := ts.ReadFile(args[0])
				got = regexp.MustCompile(`\b\d+\.\d+s\b`).ReplaceAllString(got, "N.NNs")
				if want := ts.ReadFile(args[1]); got != want {
					ts.Fatalf("%s (durations masked) and %s differ:\n%s", args[0], args[1], diff.Diff(args[1], []byte(want), args[0], []byte(got)))
				}
			},
			"waitfile": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: waitfile FILE REGEXP")
				}
				re, err := regexp.Compile(args[1])
				ts.Check(err)
				deadline := time.Now().Add(time.Minute)
				for {
					data, err := os.ReadFile(ts.MkAbs(args[0]))
					if err == nil && re.Match(data) {
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("waitfile %s: no match for %q after a minute (content %q, %v)", args[0], args[1], data, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			},
		}),
		Setup: func(env *testscript.Env) error {
			// Hermetic: no provider keys or skein settings leak in.
			for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
				"GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
				"SKEIN_PROVIDER", "SKEIN_STORE", "SKEIN_SESSION_CAP", "SKEIN_OLLAMA_BASE_URL",
				"SKEIN_SERVE_TOKEN", "AGENT_SESSION_IDLE_TIMEOUT", "AGENT_SESSION_MAX_ACTIVE"} {
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
			// the same for the Responses and Gemini protocols
			fakeProviders := newFakeProviders()
			env.Defer(fakeProviders.Close)
			env.Setenv("FAKE_PROVIDERS_URL", fakeProviders.URL)
			return nil
		},
	})
}
