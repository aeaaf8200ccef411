// Package wire holds what skein's HTTP provider clients (llm/openai,
// llm/openairesponses, llm/anthropic and llm/gemini) share: assembling a
// JSON request body from cached message forms, sending it under a
// per-request timeout, reading server-sent events, turning transport and
// HTTP failures into categorised *llm.Error values, and keeping the API
// key out of every error.
package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/telemetry"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Call is one HTTP model call.
type Call struct {
	Provider string       // the provider's name, for errors
	Client   *http.Client // nil: http.DefaultClient
	URL      string
	// Header holds the protocol's own headers (the key's, a version);
	// Do adds Content-Type and the Accept that Request.Stream asks for.
	Header http.Header
	// Request is the model call, Model the model it asks for as the
	// protocol names it (empty: an invalid_request error, nothing sent),
	// and Encode makes the JSON body of it (an error is an
	// invalid_request error).
	Request *llm.Request
	Model   string
	Encode  func(*llm.Request) (*JSON, error)
	// Timeout bounds the whole call, reading the reply included (0: none).
	Timeout time.Duration
	// Secret is the API key; it is scrubbed from every error message.
	Secret string
	// Fail turns a non-2xx response (status, headers, at most 64 KiB of
	// body) into an error; HTTPError does the common part.
	Fail func(status int, h http.Header, body []byte) *llm.Error
	// ReadStream reads a 2xx response that carries server-sent events,
	// passing the deltas to onDelta (Request.OnDelta) as they come, and
	// ReadWhole any other 2xx response, into the reply. They return
	// *llm.Error for failures the protocol reports (a stream's error
	// event, a truncated stream, a malformed body) and read errors as
	// they come.
	ReadStream func(body io.Reader, onDelta func(llm.Delta)) (*llm.Response, error)
	ReadWhole  func(body io.Reader) (*llm.Response, error)
}

// errRequestTimeout is the cause of the per-request context when
// Call.Timeout expires.
var errRequestTimeout = errors.New("request timeout")

// Do performs the call and names c.Provider in the reply. Cancellation of
// ctx returns ctx's error, never an *llm.Error, and discards any partial
// reply. Every other failure is an *llm.Error naming c.Provider, whose
// message never contains c.Secret: no model or a request that cannot be
// encoded is `invalid_request`, the Timeout expiring is `timeout`, a
// connection that cannot be made or breaks is `network`, and an error
// response is whatever c.Fail decides.
func Do(ctx context.Context, c *Call) (*llm.Response, error) {
	var resp *llm.Response
	var e *llm.Error
	if c.Model == "" {
		e = &llm.Error{Category: llm.InvalidRequest, Message: "no model given"}
	} else if body, err := c.Encode(c.Request); err != nil {
		e = &llm.Error{Category: llm.InvalidRequest, Message: err.Error()}
	} else if resp, e = c.send(ctx, body); ctx.Err() != nil {
		// Cancelled while the reply was read, even if the rest of it was
		// already buffered: the partial or late reply is discarded.
		return nil, ctx.Err()
	}
	if e == nil {
		resp.Provider = c.Provider
		return resp, nil
	}
	e.Provider = c.Provider
	e.Message = Scrub(e.Message, c.Secret)
	return nil, e
}

// send sends body under the call's timeout and reads the reply.
func (c *Call) send(ctx context.Context, body *JSON) (*llm.Response, *llm.Error) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if c.Timeout > 0 {
		cctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, errRequestTimeout)
	}
	defer cancel()
	resp, e := c.do(cctx, body)
	if e != nil && errors.Is(context.Cause(cctx), errRequestTimeout) {
		e = &llm.Error{Category: llm.Timeout, Message: fmt.Sprintf("no complete reply within the request timeout of %s", c.Timeout)}
	}
	return resp, e
}

// Endpoint checks a configured base URL, an http(s) URL with a host, and
// returns it without trailing slashes. The error names the provider and
// shows the URL without key.
func Endpoint(provider, base, key string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: base url %q is not an http(s) url", provider, Scrub(base, key))
	}
	return strings.TrimRight(base, "/"), nil
}

func (c *Call) do(ctx context.Context, body *JSON) (*llm.Response, *llm.Error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, nil)
	if err != nil {
		return nil, &llm.Error{Category: llm.InvalidRequest, Message: Describe("building the request", err.Error())}
	}
	// The body's pieces go to the connection as they are, never joined
	// (see JSON); GetBody lets the client resend it on a new connection.
	reader := func() (io.ReadCloser, error) { return io.NopCloser(body.Reader()), nil }
	req.Body, _ = reader()
	req.GetBody, req.ContentLength = reader, int64(body.Len())
	for k, v := range c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	telemetry.Inject(ctx, req.Header) // the traceparent of the chat span, when tracing
	if c.Request.Stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, transportError("connection failed", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil && len(body) == 0 {
			return nil, transportError("reading the error response", err)
		}
		return nil, c.Fail(resp.StatusCode, resp.Header, body)
	}
	var r *llm.Response
	if IsEventStream(resp) {
		r, err = c.ReadStream(resp.Body, c.Request.OnDelta)
	} else {
		r, err = c.ReadWhole(resp.Body)
	}
	if err != nil {
		if e, ok := llm.AsError(err); ok {
			return nil, e
		}
		return nil, transportError("reading the reply", err)
	}
	return r, nil
}

// transportError categorises an error of the HTTP client or of reading a
// body: timeouts (the client's own Timeout, a dial timeout) are
// `timeout`, everything else (refused, reset, broken connections) is
// `network`.
func transportError(doing string, err error) *llm.Error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &llm.Error{Category: llm.Timeout, Message: Describe(doing, err.Error())}
	}
	return &llm.Error{Category: llm.Network, Message: Describe(doing, err.Error())}
}

// Truncated is the error for a stream that ended before its terminator:
// the connection closed early, so the reply is incomplete. It is transient.
func Truncated(terminator string) *llm.Error {
	return &llm.Error{Category: llm.Network, Message: fmt.Sprintf("stream ended before %s: the reply is incomplete", terminator)}
}

// Malformed is the error for a reply that cannot be decoded: a
// server_error, since the server broke the protocol.
func Malformed(what string, err error) *llm.Error {
	return &llm.Error{Category: llm.ServerError, Message: Describe("malformed "+what, err.Error())}
}

// IsEventStream reports whether a response carries server-sent events;
// a server asked to stream may still answer with one JSON body.
func IsEventStream(resp *http.Response) bool {
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	return strings.HasPrefix(strings.TrimSpace(ct), "text/event-stream")
}
