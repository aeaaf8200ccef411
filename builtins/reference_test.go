package builtins_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workflow"
)

var update = flag.Bool("update", false, "rewrite docs/builtins.md from the code")

const referencePath = "../docs/builtins.md"

// TestReference keeps docs/builtins.md in step with builtins.Specs.
func TestReference(t *testing.T) {
	want := builtins.Reference()
	if *update {
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date; run: go test ./builtins -run TestReference -update", referencePath)
	}
}

// TestEveryPredeclaredBuiltinIsDocumented checks the other direction:
// every name a script sees is in the reference or is a standard module.
func TestEveryPredeclaredBuiltinIsDocumented(t *testing.T) {
	st, err := builtins.NewState(vm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := builtins.Reference()
	for name := range st.Predeclared() {
		switch name {
		case "json", "time", "math", "struct", "argv":
			continue
		}
		if !strings.Contains(ref, "`"+name) {
			t.Errorf("predeclared %s is not in the reference", name)
		}
	}
}

// TestEventsAreDocumented fails when an event type is missing from
// docs/agents.md.
func TestEventsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{
		sessions.EventMessage, sessions.EventReset, sessions.EventTrim, sessions.EventFork, sessions.EventHealed,
		sessions.EventStatus, sessions.EventRewind, sessions.EventInfo,
		agent.EventTurnStart, agent.EventTurnEnd, agent.EventLLMCall, agent.EventLLMRetry, agent.EventTextDelta, agent.EventState,
		agent.EventToolCall, agent.EventToolResult, agent.EventFeedbackInjected, agent.EventBudgetExhausted,
		agent.EventLoopStuck, agent.EventError, agent.EventCancelled, agent.EventCompaction, agent.EventTranscriptCompacted,
		"subagent_start", "subagent_end",
		workflow.EventWorkflowStart, workflow.EventStageStart, workflow.EventStageEnd, workflow.EventWorkflowEnd,
	} {
		if !strings.Contains(string(doc), "`"+typ+"`") {
			t.Errorf("event %s is not in docs/agents.md", typ)
		}
	}
}
