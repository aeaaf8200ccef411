// Package openairesponses is skein's client for OpenAI's Responses API
// (POST {base}/responses), written on net/http and encoding/json like
// llm/openai. It implements llm.Provider as "openai_responses".
//
// A Provider maps an llm.Request onto the wire format (request.go), reads
// the reply as one Response object or as a stream of semantic server-sent
// events (response.go), and reports failures as categorised *llm.Error
// values in the error format OpenAI shares across its APIs
// (llm/internal/openaiwire). The API key is sent in the Authorization
// header only and never appears in an error.
//
// Nothing is stored on OpenAI's side (store: false): skein keeps the
// transcript. Reasoning models therefore get their reasoning back as
// encrypted content: the output items of a reply that reasoned are kept,
// byte for byte, in a thinking block of origin "openai_responses" and
// sent back unchanged with the next request.
package openairesponses

import (
	"context"
	"net/http"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/openaiwire"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// Name is the provider's name as scripts write it.
const Name = "openai_responses"

// DefaultBaseURL is the API root the path /responses is appended to.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Provider.
type Config struct {
	// Name is the provider's name (default Name).
	Name string
	// BaseURL is the API root (default DefaultBaseURL).
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// HTTPClient makes the requests (default: a client with no timeout of
	// its own).
	HTTPClient *http.Client
	// Timeout bounds each call, the whole streamed reply included (0: no
	// limit beyond the caller's context). Expiry is a `timeout` error.
	Timeout time.Duration
}

// Provider is an llm.Provider speaking the Responses API. It is safe for
// concurrent use.
type Provider struct {
	name    string
	url     string
	key     string
	client  *http.Client
	timeout time.Duration
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg. It fails when the base URL is not an
// http(s) URL.
func New(cfg Config) (*Provider, error) {
	name := cfg.Name
	if name == "" {
		name = Name
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	base, err := wire.Endpoint(name, base, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	return &Provider{
		name:    name,
		url:     base + "/responses",
		key:     cfg.APIKey,
		client:  cfg.HTTPClient,
		timeout: cfg.Timeout,
	}, nil
}

// Name returns the provider's configured name.
func (p *Provider) Name() string { return p.name }

// Complete performs one call, streaming when req.Stream is set (text and
// reasoning summary deltas go to req.OnDelta as they arrive). Cancelling
// ctx aborts the call and returns ctx's error; every other failure is an
// *llm.Error.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	h := http.Header{}
	if p.key != "" {
		h.Set("Authorization", "Bearer "+p.key)
	}
	return wire.Do(ctx, &wire.Call{
		Provider:   p.name,
		Client:     p.client,
		URL:        p.url,
		Header:     h,
		Request:    req,
		Model:      req.Model,
		Encode:     encodeRequest,
		Timeout:    p.timeout,
		Secret:     p.key,
		Fail:       openaiwire.Failure,
		ReadStream: readStream,
		ReadWhole:  readResponse,
	})
}
