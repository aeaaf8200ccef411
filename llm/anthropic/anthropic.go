// Package anthropic is skein's client for the Anthropic Messages API
// (POST {base}/v1/messages), written on net/http and encoding/json. It
// implements llm.Provider.
//
// A Provider maps an llm.Request onto the wire format (request.go): the
// system prompt outside the messages, content blocks, thinking blocks sent
// back with their signatures, tool results merged into user turns. It
// reads the reply as one JSON body or as a stream of named server-sent
// events (response.go) and reports failures as categorised *llm.Error
// values (errors.go). The API key is sent in the x-api-key header only and
// never appears in an error.
package anthropic

import (
	"context"
	"net/http"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// Name is the provider's name as scripts write it.
const Name = "anthropic"

// DefaultBaseURL is the API root the path /v1/messages is appended to.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is the anthropic-version header sent with every request.
const APIVersion = "2023-06-01"

// DefaultMaxTokens is the max_tokens sent when neither the request nor the
// configuration sets one (the API requires the field).
const DefaultMaxTokens = 4096

// RawArgumentsKey is the only key of a tool call's arguments when the
// model's streamed input is not a JSON object (cut short at the token
// limit): the call is returned with the text under this key rather than
// failing the model call, so that the agent loop can answer it with an
// error result and the model can try again.
const RawArgumentsKey = wire.RawArgumentsKey

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root (default DefaultBaseURL); the path
	// /v1/messages is appended to it.
	BaseURL string
	// APIKey is sent in the x-api-key header when not empty.
	APIKey string
	// HTTPClient makes the requests (default: a client with no timeout of
	// its own, on http.DefaultTransport).
	HTTPClient *http.Client
	// Timeout bounds each call, the whole streamed reply included (0: no
	// limit beyond the caller's context). Expiry is a `timeout` error.
	Timeout time.Duration
	// DefaultMaxTokens is max_tokens for requests that do not set
	// MaxTokens (0: the package's DefaultMaxTokens).
	DefaultMaxTokens int
}

// Provider is an llm.Provider speaking Anthropic Messages. It is safe for
// concurrent use.
type Provider struct {
	url       string
	key       string
	client    *http.Client
	timeout   time.Duration
	maxTokens int
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg. It fails when the base URL is not an
// http(s) URL.
func New(cfg Config) (*Provider, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	base, err := wire.Endpoint(Name, base, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	maxTokens := cfg.DefaultMaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Provider{
		url:       base + "/v1/messages",
		key:       cfg.APIKey,
		client:    cfg.HTTPClient,
		timeout:   cfg.Timeout,
		maxTokens: maxTokens,
	}, nil
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Complete performs one Messages call, streaming when req.Stream is set
// (text and thinking deltas go to req.OnDelta as they arrive). Cancelling
// ctx aborts the call and returns ctx's error; every other failure is an
// *llm.Error.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	h := http.Header{}
	h.Set("Anthropic-Version", APIVersion)
	if p.key != "" {
		h.Set("X-Api-Key", p.key)
	}
	return wire.Do(ctx, &wire.Call{
		Provider:   Name,
		Client:     p.client,
		URL:        p.url,
		Header:     h,
		Request:    req,
		Model:      req.Model,
		Encode:     p.encodeRequest,
		Timeout:    p.timeout,
		Secret:     p.key,
		Fail:       failure,
		ReadStream: readStream,
		ReadWhole:  readMessage,
	})
}
