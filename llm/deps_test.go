package llm

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestProvidersDoNotLinkTheStore: package llm, the provider clients under
// llm/ and their tests use the transcript's types from sessions/message
// and never import the session store (package sessions, its backends and
// their drivers), directly or through another package.
func TestProvidersDoNotLinkTheStore(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-test", "github.com/skein-dev/skein/llm/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"github.com/skein-dev/skein/llm/anthropic", "github.com/skein-dev/skein/sessions/message"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lists no %s: %q", want, deps)
		}
	}
	for _, d := range deps {
		if d == "github.com/skein-dev/skein/sessions" || strings.HasPrefix(d, "github.com/skein-dev/skein/sessions/") && d != "github.com/skein-dev/skein/sessions/message" {
			t.Errorf("a package under llm/ links %s: provider clients use sessions/message, not the store", d)
		}
	}
}
