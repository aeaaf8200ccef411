package wiretest

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// conversation returns n messages of an agent conversation with every
// kind of message a provider encodes: user text, an assistant calling two
// tools, their results (one failed, one without the tool's name), content
// blocks with an image, a system message in the middle, an empty
// assistant message, thinking kept by each protocol (Anthropic's signed
// blocks, Gemini's parts, Responses' output items, with characters HTML
// escaping would change), and text answers.
func conversation(n int) []message.Message {
	var out []message.Message
	for i := 0; len(out) < n; i++ {
		a, b := fmt.Sprintf("call_%d_a", i), fmt.Sprintf("call_%d_b", i)
		out = append(out,
			message.Message{Role: message.RoleUser, Text: fmt.Sprintf("step %d", i)},
			message.Message{Role: message.RoleAssistant, Text: "checking", ToolCalls: []message.ToolCall{
				{ID: a, Name: "read", Arguments: map[string]any{"path": "a.txt", "n": int64(i)}},
				{ID: b, Name: "run", Arguments: map[string]any{"argv": []any{"go", "test"}}}}},
			message.Message{Role: message.RoleTool, ToolCallID: a, Name: "read", Text: "contents"},
			message.Message{Role: message.RoleTool, ToolCallID: b, Text: "exit 1", IsError: true},
			message.Message{Role: message.RoleUser, Blocks: []message.Block{{Type: message.BlockText, Text: "see"},
				{Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
			message.Message{Role: message.RoleSystem, Text: "be brief"},
			message.Message{Role: message.RoleAssistant},
			message.Message{Role: message.RoleAssistant, Blocks: []message.Block{
				{Type: message.BlockThinking, Thinking: "so <b> & c", Signature: "sig<&>"},
				{Type: message.BlockThinking, Origin: "gemini", Data: `[{"text":"a <b>","thoughtSignature":"s<&>"}]`},
				{Type: message.BlockThinking, Origin: "openai_responses", Data: `[{"type":"reasoning","encrypted_content":"x<&>"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a <b>"}]}]`},
				{Type: message.BlockText, Text: fmt.Sprintf("answer %d <&>", i)}}},
		)
	}
	return out[:n]
}

// CheckWireCache checks a provider's use of llm.WireCache: a conversation
// grows a message at a time, as an agent loop's does (sometimes moving to
// a new array, and once reset to a shorter one), and at every step the
// request body encode builds with the cache is byte for byte the body it
// builds without one.
func CheckWireCache(t *testing.T, encode func(*llm.Request) (*wire.JSON, error)) {
	t.Helper()
	all := conversation(60)
	cache := &llm.WireCache{}
	var msgs []message.Message
	for i, m := range all {
		if i == 40 {
			msgs = append([]message.Message(nil), msgs[:10]...) // a reset: new addresses, fewer messages
		}
		msgs = append(msgs, m)
		req := &llm.Request{Model: "m", System: "you are a test", Messages: msgs, MaxTokens: 100,
			Tools:   []llm.ToolSpec{{Name: "read", Parameters: map[string]any{"type": "object"}}},
			NoCache: i%3 == 0} // prompt-cache breakpoints on most steps, off on some
		want, err := encode(req)
		if err != nil {
			t.Fatalf("step %d without a cache: %v", i, err)
		}
		for range 2 { // the second time every form comes from the cache
			req.Cache = cache
			got, err := encode(req)
			if err != nil {
				t.Fatalf("step %d with the cache: %v", i, err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("step %d: with the cache the body is\n%s\nwithout\n%s", i, got.Bytes(), want.Bytes())
			}
		}
	}
	// The bodies above would match as well if encode ignored the cache.
	// A message changed in place (which a transcript never does) shows
	// that the cached form is what is sent.
	req := &llm.Request{Model: "m", System: "you are a test", Messages: msgs, MaxTokens: 100, Cache: cache}
	before, err := encode(req)
	if err != nil {
		t.Fatal(err)
	}
	sent := bytes.Clone(before.Bytes())
	msgs[0].Text = "changed in place"
	after, err := encode(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Bytes(), sent) {
		t.Fatalf("a message at the same address was encoded again: the cache is not used\n%s", after.Bytes())
	}
}

// BenchRequestBuild measures what building a request body (encode) costs
// as a conversation grows, with and without an llm.WireCache: an agent
// loop's step, one message appended to a conversation of about 10 and of
// about 1,000 messages (each run of 10 steps starts from a cache filled by
// one call, outside the measure). It reports, side by side in one run,
// the µs and allocations of one build at each size and the ratio of the
// large to the small, with the cache (flat: O(new messages) plus a copy)
// and without (O(all messages)).
func BenchRequestBuild(b *testing.B, encode func(*llm.Request) (*wire.JSON, error)) {
	const steps = 10
	sizes := []int{10, 1000}
	all := conversation(sizes[len(sizes)-1] + steps)
	request := func(msgs []message.Message, cache *llm.WireCache) *llm.Request {
		return &llm.Request{Model: "m", System: "you are a test", Messages: msgs, MaxTokens: 100,
			Tools: []llm.ToolSpec{{Name: "read", Parameters: map[string]any{"type": "object"}}}, Cache: cache}
	}
	type config struct {
		size   int
		cached bool
		cache  *llm.WireCache
		step   int
		ns     time.Duration
		allocs uint64
	}
	var configs []*config
	for _, cached := range []bool{true, false} {
		for _, n := range sizes {
			configs = append(configs, &config{size: n, cached: cached})
		}
	}
	build := func(c *config) {
		if c.step == steps {
			c.step = 0
		}
		if c.cached && c.step == 0 {
			c.cache = &llm.WireCache{}
			if _, err := encode(request(all[:c.size-1], c.cache)); err != nil {
				b.Fatal(err)
			}
		}
		req := request(all[:c.size+c.step], c.cache)
		c.step++
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := encode(req)
		c.ns += time.Since(start)
		runtime.ReadMemStats(&after)
		c.allocs += after.Mallocs - before.Mallocs
		if err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		for _, c := range configs {
			build(c)
		}
	}
	per := func(c *config) (us, allocs float64) {
		return float64(c.ns.Nanoseconds()) / 1e3 / float64(b.N), float64(c.allocs) / float64(b.N)
	}
	for _, c := range configs {
		us, allocs := per(c)
		kind := "cached"
		if !c.cached {
			kind = "uncached"
		}
		b.ReportMetric(us, fmt.Sprintf("µs/build-%s-%d", kind, c.size))
		b.ReportMetric(allocs, fmt.Sprintf("allocs/build-%s-%d", kind, c.size))
	}
	small, large := configs[0], configs[1]
	usSmall, _ := per(small)
	usLarge, _ := per(large)
	b.ReportMetric(usLarge/usSmall, "x-cached-1000/10")
	usSmall, _ = per(configs[2])
	usLarge, _ = per(configs[3])
	b.ReportMetric(usLarge/usSmall, "x-uncached-1000/10")
}
