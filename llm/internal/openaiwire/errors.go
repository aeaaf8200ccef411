// Package openaiwire holds what OpenAI's two APIs, Chat Completions
// (llm/openai) and Responses (llm/openairesponses), share on the wire: the
// error format and its categories, and the usage object.
package openaiwire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// apiError is an error object as OpenAI and compatible servers send it.
type apiError struct {
	Message string
	Type    string
	Code    string
	// Status is a numeric code, which some servers (vLLM) set to the HTTP
	// status the error stands for.
	Status int
}

// kind names the error the way the server does: its code, else its type.
func (e *apiError) kind() string {
	if e.Code != "" && e.Status == 0 {
		return e.Code
	}
	return e.Type
}

// parseError decodes an error body: {"error": {...}} (OpenAI, Ollama,
// llama.cpp), {"error": "text"}, or a top-level error object with a
// message (vLLM's {"object": "error", ...}). ok is false when the body is
// none of these.
func parseError(body []byte) (e apiError, ok bool) {
	var env struct {
		Error json.RawMessage `json:"error"`
		apiErrorJSON
	}
	if json.Unmarshal(body, &env) != nil {
		return e, false
	}
	if HasError(env.Error) {
		return decodeError(env.Error), true
	}
	if env.Message != "" {
		return env.apiErrorJSON.apiError(), true
	}
	return e, false
}

type apiErrorJSON struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (j *apiErrorJSON) apiError() apiError {
	e := apiError{Message: j.Message, Type: j.Type}
	code := bytes.TrimSpace(j.Code)
	switch {
	case len(code) == 0 || string(code) == "null":
	case code[0] == '"':
		json.Unmarshal(code, &e.Code)
	default:
		e.Code = string(code)
		if n, err := strconv.Atoi(e.Code); err == nil && n >= 100 && n <= 599 {
			e.Status = n
		}
	}
	return e
}

// decodeError decodes the value of an "error" key: an object or a string.
func decodeError(raw json.RawMessage) apiError {
	var j apiErrorJSON
	if json.Unmarshal(raw, &j) == nil {
		return j.apiError()
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return apiError{Message: s}
	}
	return apiError{Message: string(raw)}
}

// HasError reports whether raw, the value of an "error" key, holds an
// error (is present and not null).
func HasError(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// Failure turns an error response of OpenAI or of a server speaking its
// error format (Chat Completions, Responses, Azure OpenAI, compatible
// servers) into an *llm.Error. Its message is
// "http <status>: <code or type>: <message>", or the trimmed body when the
// body is not a JSON error.
func Failure(status int, h http.Header, body []byte) *llm.Error {
	e, ok := parseError(body)
	var msg string
	if ok {
		msg = wire.Describe(wire.StatusText(status), e.kind(), e.Message)
	} else {
		msg = wire.Describe(wire.StatusText(status), wire.BodyText(status, body))
		e = apiError{Message: string(body)}
	}
	cat, final := classify(status, &e)
	return wire.HTTPError(status, h, cat, msg, final)
}

// ReplyError turns an error object found in a 200 reply (mid-stream, or
// instead of a completion) into an *llm.Error.
func ReplyError(raw json.RawMessage) *llm.Error {
	e := decodeError(raw)
	cat, _ := classify(0, &e)
	return &llm.Error{Category: cat, Message: wire.Describe("error in the reply", e.kind(), e.Message)}
}

// classify chooses the category of an error; final reports an exhausted
// quota, which no retry (whatever the headers say) can fix.
//
// Quota and billing errors (insufficient_quota, even on a 429) are `auth`:
// the account cannot make calls until someone acts, as with a bad key.
// Context-window errors are `context_length`. Otherwise the HTTP status
// decides (see wire.StatusCategory); an error inside a 200 reply goes by
// the status some servers put in its code, else by its code or type,
// else it is a `server_error`.
func classify(status int, e *apiError) (cat llm.Category, final bool) {
	text := e.Code + " " + e.Type + " " + e.Message
	if status < 500 && wire.LooksLikeQuota(text) {
		return llm.Auth, true
	}
	if status != http.StatusTooManyRequests && status < 500 && wire.LooksLikeContextLength(text) {
		return llm.ContextLength, false
	}
	if status == 0 {
		status = e.Status
	}
	if status != 0 {
		return wire.StatusCategory(status), false
	}
	for _, k := range []string{e.Code, e.Type} {
		switch strings.ToLower(k) {
		case "rate_limit_exceeded", "rate_limit_error", "requests", "tokens":
			return llm.RateLimit, false
		case "overloaded", "overloaded_error", "server_overloaded":
			return llm.Overloaded, false
		case "timeout", "timeout_error":
			return llm.Timeout, false
		case "invalid_request_error", "invalid_request", "bad_request", "not_found_error", "model_not_found":
			return llm.InvalidRequest, false
		case "authentication_error", "permission_error", "invalid_api_key":
			return llm.Auth, false
		}
	}
	return llm.ServerError, false
}
