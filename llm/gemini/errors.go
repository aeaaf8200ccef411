package gemini

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// apiError is a google.rpc.Status as the API sends it:
// {"error": {"code": 429, "message": ..., "status": "RESOURCE_EXHAUSTED",
// "details": [...]}}.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`
		RetryDelay string `json:"retryDelay"`
	} `json:"details"`
}

// parseError decodes an error body: {"error": {...}}, or the same inside a
// one-element list. ok is false when the body is neither.
func parseError(body []byte) (e apiError, ok bool) {
	var env struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil {
		var list []struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(body, &list) != nil || len(list) == 0 {
			return e, false
		}
		env.Error = list[0].Error
	}
	if env.Error == nil || (env.Error.Message == "" && env.Error.Status == "") {
		return e, false
	}
	return *env.Error, true
}

// reason returns the ErrorInfo reason of the details (API_KEY_INVALID,
// ...), if any.
func (e *apiError) reason() string {
	for _, d := range e.Details {
		if d.Reason != "" {
			return d.Reason
		}
	}
	return ""
}

// retryDelay returns the RetryInfo delay of the details ("37s"), if any.
func (e *apiError) retryDelay() time.Duration {
	for _, d := range e.Details {
		if d.RetryDelay != "" {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// failure turns an error response into an *llm.Error. Its message is
// "http <status>: <STATUS>: <message>", or the trimmed body when the body
// is not a JSON error. A RetryInfo delay in the body counts when no
// retry-after header says otherwise.
func failure(status int, h http.Header, body []byte) *llm.Error {
	e, ok := parseError(body)
	if !ok {
		return wire.HTTPError(status, h, wire.StatusCategory(status), wire.Describe(wire.StatusText(status), wire.BodyText(status, body)), false)
	}
	err := wire.HTTPError(status, h, classify(status, &e), wire.Describe(wire.StatusText(status), e.Status, e.Message), false)
	if err.RetryAfter == 0 {
		err.RetryAfter = e.retryDelay()
	}
	return err
}

// replyError turns an error object found in a 200 reply (mid-stream) into
// an *llm.Error.
func replyError(raw json.RawMessage) *llm.Error {
	var e apiError
	if json.Unmarshal(raw, &e) != nil {
		return &llm.Error{Category: llm.ServerError, Message: wire.Describe("error in the reply", string(raw))}
	}
	return &llm.Error{Category: classify(e.Code, &e), Message: wire.Describe("error in the reply", e.Status, e.Message), RetryAfter: e.retryDelay()}
}

// classify chooses the category of an error. A key the API rejects
// (API_KEY_INVALID, sent as a 400) is `auth`; a prompt over the model's
// limit is `context_length`; RESOURCE_EXHAUSTED, the API's rate limit and
// per-minute quota, is `rate_limit` (its RetryInfo says when to retry).
// Otherwise the canonical status decides, else the HTTP status.
func classify(status int, e *apiError) llm.Category {
	text := e.Message + " " + e.reason()
	if strings.Contains(text, "API_KEY_INVALID") || strings.Contains(strings.ToLower(e.Message), "api key not valid") {
		return llm.Auth
	}
	if status != http.StatusTooManyRequests && status < 500 && wire.LooksLikeContextLength(e.Message) {
		return llm.ContextLength
	}
	switch e.Status {
	case "RESOURCE_EXHAUSTED":
		return llm.RateLimit
	case "UNAVAILABLE":
		return llm.Overloaded
	case "DEADLINE_EXCEEDED":
		return llm.Timeout
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return llm.ServerError
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		return llm.Auth
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND", "OUT_OF_RANGE", "UNIMPLEMENTED":
		return llm.InvalidRequest
	}
	if status != 0 {
		return wire.StatusCategory(status)
	}
	return llm.ServerError
}
