package wire

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skein-dev/skein/llm"
)

// MaxMessageLen bounds the provider text kept in an error message, in
// bytes; longer text is cut at a rune boundary and ends with "...".
const MaxMessageLen = 500

// StatusCategory is the category an HTTP error status implies on its own,
// before the body is looked at: 401 and 403 auth, 408 and 504 timeout, 429
// rate_limit, 503 and 529 overloaded, other 5xx server_error, other 4xx
// invalid_request. Anything else (a 1xx or 3xx reaching us as a failure)
// is a server_error.
func StatusCategory(status int) llm.Category {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.Auth
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return llm.Timeout
	case status == http.StatusTooManyRequests:
		return llm.RateLimit
	case status == http.StatusServiceUnavailable || status == 529:
		return llm.Overloaded
	case status >= 500:
		return llm.ServerError
	case status >= 400:
		return llm.InvalidRequest
	}
	return llm.ServerError
}

// HTTPError builds the error for a failed HTTP response. The caller has
// read the body and chosen the category and message; HTTPError adds the
// retry hints of the headers:
//
//   - retry-after-ms (milliseconds) or else retry-after (seconds or an
//     HTTP date) become RetryAfter;
//   - x-should-retry: false sets NoRetry;
//   - x-should-retry: true makes a terminal category retryable by
//     recategorising it as server_error (the server says the same request
//     may succeed), unless final is set or the category is context_length:
//     no retry can fix an exhausted quota or an over-long prompt.
func HTTPError(status int, h http.Header, cat llm.Category, msg string, final bool) *llm.Error {
	e := &llm.Error{Category: cat, Message: msg, Status: status, RetryAfter: RetryAfter(h, time.Now())}
	switch strings.ToLower(strings.TrimSpace(h.Get("x-should-retry"))) {
	case "false":
		e.NoRetry = true
	case "true":
		if !final && !cat.Transient() && cat != llm.ContextLength {
			e.Category = llm.ServerError
		}
	}
	return e
}

// RetryAfter returns the delay a response asks for before a retry: the
// retry-after-ms header (milliseconds), else retry-after as seconds or as
// an HTTP date (relative to now). Absent, malformed or past values give 0.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Describe joins the non-empty parts of an error description with ": ",
// collapses runs of white space to one space and bounds the provider's
// text to MaxMessageLen, so that a message is one readable line however
// large the body was.
func Describe(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		p = strings.Join(strings.Fields(p), " ")
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p)
	}
	s := b.String()
	if len(s) > MaxMessageLen {
		cut := MaxMessageLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// StatusText names an HTTP status for a message: "http 429".
func StatusText(status int) string { return "http " + strconv.Itoa(status) }

// BodyText is the text of an error body that is not the provider's JSON
// (a proxy's HTML page, plain text): the body itself, which Describe
// trims, or the status's standard text when the body is empty.
func BodyText(status int, body []byte) string {
	if s := strings.TrimSpace(string(body)); s != "" {
		return s
	}
	return http.StatusText(status)
}

// Redacted replaces the API key in text messages.
const Redacted = "[redacted]"

// Scrub returns s with every occurrence of secret replaced by Redacted. An
// empty secret changes nothing.
func Scrub(s, secret string) string {
	if secret == "" || !strings.Contains(s, secret) {
		return s
	}
	return strings.ReplaceAll(s, secret, Redacted)
}

// contextLengthMarkers are lower-case fragments of the messages servers
// send when the prompt does not fit the model's context window: OpenAI
// ("maximum context length", code context_length_exceeded), Anthropic
// ("prompt is too long", "exceed context limit"), vLLM, llama.cpp
// ("exceeds the available context size"), Gemini ("The input token count
// (N) exceeds the maximum number of tokens allowed (M)") and gateways that
// relay them.
var contextLengthMarkers = []string{
	"context_length_exceeded",
	"maximum context length",
	"context length exceeded",
	"exceeds the context window",
	"exceed context limit",
	"exceeds the available context size",
	"exceed_context_size",
	"prompt is too long",
	"input is too long for",
	"exceeds the maximum number of tokens allowed",
}

// LooksLikeContextLength reports whether an error text says the prompt
// is too long for the model's context window.
func LooksLikeContextLength(text string) bool {
	return containsAny(strings.ToLower(text), contextLengthMarkers)
}

// quotaMarkers are lower-case fragments of the errors servers send when an
// account has no quota or credit left: OpenAI (insufficient_quota,
// billing_hard_limit_reached), Anthropic (billing_error, "credit balance is
// too low", "reached your specified api usage limits"). Retrying cannot
// help until someone acts, so these are terminal.
var quotaMarkers = []string{
	"insufficient_quota",
	"exceeded your current quota",
	"billing_hard_limit_reached",
	"billing_not_active",
	"billing_error",
	"credit balance is too low",
	"api usage limits",
	"spend limit",
}

// LooksLikeQuota reports whether an error text says the account's quota,
// credit or spend limit is exhausted.
func LooksLikeQuota(text string) bool {
	return containsAny(strings.ToLower(text), quotaMarkers)
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
