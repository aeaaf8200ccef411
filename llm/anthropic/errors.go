package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// apiError is the error object of an error response or error event:
// {"type": "error", "error": {"type": "overloaded_error", "message": ...}}.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// parseError decodes an error body; ok is false when the body is not an
// error object (a proxy's HTML page, plain text).
func parseError(body []byte) (e apiError, ok bool) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		return e, false
	}
	e = decodeError(env.Error)
	return e, e.Type != "" || e.Message != ""
}

// decodeError decodes the value of an "error" key: an object, or (from a
// relay) a bare string.
func decodeError(raw json.RawMessage) apiError {
	var e apiError
	if json.Unmarshal(raw, &e) == nil {
		return e
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return apiError{Message: s}
	}
	return apiError{Message: string(raw)}
}

// failure turns an error response into an *llm.Error. Its message is
// "http <status>: <type>: <message>", or the trimmed body when the body is
// not an error object.
func failure(status int, h http.Header, body []byte) *llm.Error {
	e, ok := parseError(body)
	var msg string
	if ok {
		msg = wire.Describe(wire.StatusText(status), e.Type, e.Message)
	} else {
		msg = wire.Describe(wire.StatusText(status), wire.BodyText(status, body))
		e = apiError{Message: string(body)}
	}
	cat, final := classify(status, &e)
	return wire.HTTPError(status, h, cat, msg, final)
}

// replyError turns the error of an error event (or of a 200 body of type
// error) into an *llm.Error.
func replyError(raw json.RawMessage) *llm.Error {
	e := decodeError(raw)
	cat, _ := classify(0, &e)
	return &llm.Error{Category: cat, Message: wire.Describe("error event", e.Type, e.Message)}
}

// classify chooses the category of an error; final reports an exhausted
// quota, which no retry (whatever the headers say) can fix.
//
// Billing errors and spent credit or usage limits are `auth`: the account
// cannot make calls until someone acts, as with a bad key. "prompt is too
// long" and other context-window errors are `context_length`. Otherwise
// the error type decides, since the API sends overloaded_error with a 429
// as well as a 529: overloaded_error → overloaded, rate_limit_error →
// rate_limit, api_error → server_error, timeout_error → timeout,
// authentication_error and permission_error → auth, invalid_request_error,
// not_found_error and request_too_large → invalid_request. Without a
// known type the HTTP status decides (see wire.StatusCategory), and an
// error event without one is a server_error.
func classify(status int, e *apiError) (cat llm.Category, final bool) {
	text := e.Type + " " + e.Message
	if status < 500 && wire.LooksLikeQuota(text) {
		return llm.Auth, true
	}
	if status != http.StatusTooManyRequests && status < 500 && wire.LooksLikeContextLength(text) {
		return llm.ContextLength, false
	}
	switch e.Type {
	case "overloaded_error":
		return llm.Overloaded, false
	case "rate_limit_error":
		return llm.RateLimit, false
	case "api_error":
		return llm.ServerError, false
	case "timeout_error":
		return llm.Timeout, false
	case "authentication_error", "permission_error":
		return llm.Auth, false
	case "invalid_request_error", "not_found_error", "request_too_large":
		return llm.InvalidRequest, false
	}
	if status != 0 {
		return wire.StatusCategory(status), false
	}
	return llm.ServerError, false
}
