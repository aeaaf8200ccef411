package mock

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

func conversation(callID, thinking, answer string) *llm.Request {
	return &llm.Request{Model: "m", System: "sys", Messages: []message.Message{
		{Role: message.RoleUser, Text: "weather?"},
		{Role: message.RoleAssistant, Blocks: []message.Block{{Type: message.BlockThinking, Thinking: thinking, Signature: "sig-" + thinking}},
			ToolCalls: []message.ToolCall{{ID: callID, Name: "weather", Arguments: map[string]any{"city": "Paris"}}}},
		{Role: message.RoleTool, ToolCallID: callID, Name: "weather", Text: answer},
	}, Tools: []llm.ToolSpec{{Name: "weather", Parameters: map[string]any{"type": "object"}}}}
}

func TestFingerprintIgnoresWhatReplayCannotReproduce(t *testing.T) {
	recorded := Fingerprint(RequestShape(conversation("call_8f3a", "hmm", "sunny")))
	if got := Fingerprint(RequestShape(conversation("mock_call_1", "other thoughts", "sunny"))); got != recorded {
		t.Errorf("tool call ids or thinking changed the fingerprint: %s != %s", got, recorded)
	}
	if got := Fingerprint(RequestShape(conversation("call_8f3a", "hmm", "rainy"))); got == recorded {
		t.Error("a changed tool result kept the fingerprint")
	}
	req := conversation("c", "", "sunny")
	req.Model = "other"
	if Fingerprint(RequestShape(req)) == recorded {
		t.Error("a changed model kept the fingerprint")
	}
}

func TestStrictReplayFailsWithADiff(t *testing.T) {
	shape := RequestShape(conversation("a", "", "sunny"))
	shape["fingerprint"], shape["provider"] = Fingerprint(shape), "openai"
	line, err := json.Marshal(map[string]any{"text": "ok", RequestKey: shape})
	if err != nil {
		t.Fatal(err)
	}
	fixture := string(line) + "\n" + `{"text": "unchecked"}`
	resps, err := LoadFixture(strings.NewReader(fixture), "f.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []ReplayMode{ReplayStrict, ReplayOrder} {
		m := New()
		for _, r := range resps {
			m.Queue(r)
		}
		m.SetReplay(Replay{Fixture: "f.jsonl", Mode: mode, Rerecord: "skein run --llm-record f.jsonl p.star"})
		p := m.Wrap("openai", nil, nil)
		_, err := p.Complete(t.Context(), conversation("b", "", "rainy"))
		if mode == ReplayOrder {
			if err != nil {
				t.Errorf("order mode: %v", err)
			}
			continue
		}
		want := "llm replay: request 1 does not match the one recorded at f.jsonl:1:\n    message 3 (tool) changed:\n" +
			`      - {"content":"sunny","name":"weather","role":"tool","tool_call_id":"call_1"}` + "\n" +
			`      + {"content":"rainy","name":"weather","role":"tool","tool_call_id":"call_1"}` + "\n" +
			"  record it again: skein run --llm-record f.jsonl p.star\n" +
			"  or answer by order only, ignoring the requests: --llm-replay-mode order"
		if err == nil || err.Error() != want {
			t.Errorf("strict mode: got\n%v\nwant\n%s", err, want)
		}
		// an entry without a fingerprint is not checked
		if _, err := p.Complete(t.Context(), conversation("b", "", "rainy")); err != nil {
			t.Errorf("unchecked entry: %v", err)
		}
	}
}
