package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/telemetry"
	"github.com/skein-dev/skein/telemetry/telemetrytest"
)

// tracedAgent stores the prompt and a reply under an invoke_agent span,
// as an agent loop does.
type tracedAgent struct{ store *sessions.Store }

func (a *tracedAgent) Handle(ctx context.Context, id, text string) error {
	_, span := telemetry.Agent(ctx, "", id, "", "")
	defer span.End(nil, "")
	_, err := a.store.Apply(ctx, id, &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: text}, {Role: message.RoleAssistant, Text: "ok"}}})
	return err
}

// TestTraceparentContinued: a prompt carrying a W3C traceparent runs its
// turn in that trace, under the caller's span, naming the server's agent.
func TestTraceparentContinued(t *testing.T) {
	rcv := telemetrytest.NewReceiver()
	defer rcv.Close()
	t.Setenv(telemetry.EnvEndpoint, rcv.URL)
	tracer := telemetry.FromEnv(nil)
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"planner": &tracedAgent{store: store}}, Tracer: tracer})
	id := ts.create(map[string]any{"agent": "planner"})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest("POST", ts.http.URL+"/api/sessions/"+id+"/prompt", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := ts.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ts.waitIdle(id)
	// a prompt without one starts a trace of its own
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "again"}), http.StatusAccepted, "")
	ts.waitIdle(id)
	if err := tracer.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans: %s", len(spans), telemetrytest.Tree(spans))
	}
	s := spans[0]
	if s.Name != "invoke_agent planner" || s.TraceID != traceID || s.ParentID != parentID || s.Attrs["gen_ai.conversation.id"] != id {
		t.Errorf("span %s in trace %s under %s, attributes %v", s.Name, s.TraceID, s.ParentID, s.Attrs)
	}
	if s := spans[1]; s.TraceID == traceID || s.ParentID != "" {
		t.Errorf("the second turn's span is in trace %s under %q", s.TraceID, s.ParentID)
	}
}
