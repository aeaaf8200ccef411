package wire

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
)

func TestEventReader(t *testing.T) {
	type ev struct{ name, data string }
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"named events", "event: a\ndata: {\"x\":1}\n\nevent: b\ndata: 2\n\n", []ev{{"a", `{"x":1}`}, {"b", "2"}}},
		{"crlf and comments", ": keep-alive\r\ndata: one\r\n\r\n:ping\r\n\r\ndata:two\r\n\r\n", []ev{{"", "one"}, {"", "two"}}},
		{"multi-line data", "data: a\ndata: b\n\n", []ev{{"", "a\nb"}}},
		{"event without data is dropped", "event: a\n\ndata: x\n\n", []ev{{"", "x"}}},
		{"unknown fields ignored", "id: 7\nretry: 10\ndata: x\n\n", []ev{{"", "x"}}},
		{"complete last line without blank line", "data: x\n\ndata: [DONE]\n", []ev{{"", "x"}, {"", "[DONE]"}}},
		{"cut line dropped", "data: x\n\ndata: {\"a\":", []ev{{"", "x"}}},
		{"long line", "data: " + strings.Repeat("z", 100000) + "\n\n", []ev{{"", strings.Repeat("z", 100000)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewEventReader(strings.NewReader(tt.in), "")
			var got []ev
			for {
				name, data, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev{string(name), string(data)})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{}, 0},
		{map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-3"}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "junk", "Retry-After": "9"}, 9 * time.Second},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestHTTPErrorShouldRetry(t *testing.T) {
	tests := []struct {
		header string
		cat    llm.Category
		final  bool
		want   llm.Category
		retry  bool
	}{
		{"", llm.RateLimit, false, llm.RateLimit, true},
		{"false", llm.Overloaded, false, llm.Overloaded, false},
		{"true", llm.InvalidRequest, false, llm.ServerError, true},
		{"true", llm.Auth, true, llm.Auth, false},
		{"true", llm.ContextLength, false, llm.ContextLength, false},
		{"", llm.InvalidRequest, false, llm.InvalidRequest, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("X-Should-Retry", tt.header)
		}
		e := HTTPError(400, h, tt.cat, "m", tt.final)
		if e.Category != tt.want || e.Retryable() != tt.retry {
			t.Errorf("x-should-retry %q on %s: got %s (retryable %v), want %s (retryable %v)", tt.header, tt.cat, e.Category, e.Retryable(), tt.want, tt.retry)
		}
	}
}

func TestDescribe(t *testing.T) {
	if got := Describe("http 502", "", "<html>\n  <body>bad   gateway</body>\n</html>"); got != "http 502: <html> <body>bad gateway</body> </html>" {
		t.Errorf("got %q", got)
	}
	long := Describe(strings.Repeat("é", 400))
	if len(long) > MaxMessageLen+3 || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "éé") {
		t.Errorf("long message not cut at a rune boundary: %d bytes", len(long))
	}
}

func TestScrub(t *testing.T) {
	if got := Scrub("key sk-abc and sk-abc", "sk-abc"); got != "key [redacted] and [redacted]" {
		t.Errorf("got %q", got)
	}
	if got := Scrub("nothing", ""); got != "nothing" {
		t.Errorf("got %q", got)
	}
}

func TestDecodeArguments(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]any
	}{
		{"", map[string]any{}},
		{"  ", map[string]any{}},
		{"null", map[string]any{}},
		{`{"a":1,"b":[1.5,"x"]}`, map[string]any{"a": int64(1), "b": []any{1.5, "x"}}},
		{`{"a":`, map[string]any{RawArgumentsKey: `{"a":`}},
		{`[1]`, map[string]any{RawArgumentsKey: `[1]`}},
	}
	for _, tt := range tests {
		if got := DecodeArguments(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeArguments(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestMarkers(t *testing.T) {
	for _, s := range []string{
		"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
		"prompt is too long: 210000 tokens > 200000 maximum",
		"input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000",
		"the request exceeds the available context size, try increasing it",
	} {
		if !LooksLikeContextLength(s) {
			t.Errorf("not recognised as context length: %q", s)
		}
	}
	for _, s := range []string{"Rate limit reached for gpt-4o on tokens per min (TPM)", "Overloaded"} {
		if LooksLikeContextLength(s) || LooksLikeQuota(s) {
			t.Errorf("wrongly recognised: %q", s)
		}
	}
	for _, s := range []string{
		"You exceeded your current quota, please check your plan and billing details.",
		"Your credit balance is too low to access the Anthropic API.",
		"You have reached your specified API usage limits.",
	} {
		if !LooksLikeQuota(s) {
			t.Errorf("not recognised as quota: %q", s)
		}
	}
}
