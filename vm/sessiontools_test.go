package vm

import (
	"context"
	"testing"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

type namedTool string

func (n namedTool) Spec() llm.ToolSpec { return llm.ToolSpec{Name: string(n)} }
func (n namedTool) Run(context.Context, message.ToolCall) (string, error) {
	return string(n), nil
}

// TestAttachTools: tools attached to a session are that session's only;
// attaching again replaces them, and an older detach does not take the
// newer tools away.
func TestAttachTools(t *testing.T) {
	st := newTestState(t, t.TempDir())
	names := func(id string) (out []string) {
		for _, tool := range st.SessionTools(id) {
			out = append(out, tool.Spec().Name)
		}
		return out
	}
	detach1 := st.AttachTools("s", []agent.Tool{namedTool("echo")})
	if got := names("s"); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("session s has %v", got)
	}
	if got := names("other"); got != nil {
		t.Fatalf("session other has %v", got)
	}
	detach2 := st.AttachTools("s", []agent.Tool{namedTool("add")})
	detach1()
	if got := names("s"); len(got) != 1 || got[0] != "add" {
		t.Fatalf("after the old detach, session s has %v", got)
	}
	detach2()
	if got := names("s"); got != nil {
		t.Fatalf("after detach, session s has %v", got)
	}
}
