// Package gemini is skein's client for Google's Gemini models through the
// native Generative Language API: POST
// {base}/v1beta/models/{model}:generateContent, and
// :streamGenerateContent?alt=sse for streamed replies. It is written on
// net/http and encoding/json like the other clients and implements
// llm.Provider as "gemini".
//
// A Provider maps an llm.Request onto contents and parts (request.go),
// reads the reply as one GenerateContentResponse or as server-sent events
// each carrying one (response.go), and reports failures as categorised
// *llm.Error values (errors.go). The API key is sent in the
// x-goog-api-key header only and never appears in an error.
//
// Thought signatures are carried back unchanged: when a reply's parts
// carry any, the parts are kept (as JSON) in a thinking block of origin
// "gemini", and the next request sends them back as the model's turn, each
// signature in the part it came with.
package gemini

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// Name is the provider's name as scripts write it.
const Name = "gemini"

// DefaultBaseURL is the API root; the path /v1beta/models/... is appended.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root (default DefaultBaseURL).
	BaseURL string
	// APIKey is sent in the x-goog-api-key header.
	APIKey string
	// HTTPClient makes the requests (default: a client with no timeout of
	// its own).
	HTTPClient *http.Client
	// Timeout bounds each call, the whole streamed reply included (0: no
	// limit beyond the caller's context). Expiry is a `timeout` error.
	Timeout time.Duration
}

// Provider is an llm.Provider speaking the Generative Language API. It is
// safe for concurrent use.
type Provider struct {
	base    string
	key     string
	client  *http.Client
	timeout time.Duration
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
	return &Provider{base: base, key: cfg.APIKey, client: cfg.HTTPClient, timeout: cfg.Timeout}, nil
}

// Name returns "gemini".
func (p *Provider) Name() string { return Name }

// Complete performs one call, streaming when req.Stream is set (text and
// thought deltas go to req.OnDelta as they arrive). Cancelling ctx aborts
// the call and returns ctx's error; every other failure is an *llm.Error.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	model := strings.TrimPrefix(req.Model, "models/")
	target := p.base + "/v1beta/models/" + url.PathEscape(model)
	if req.Stream {
		target += ":streamGenerateContent?alt=sse"
	} else {
		target += ":generateContent"
	}
	h := http.Header{}
	if p.key != "" {
		h.Set("x-goog-api-key", p.key)
	}
	return wire.Do(ctx, &wire.Call{
		Provider:   Name,
		Client:     p.client,
		URL:        target,
		Header:     h,
		Request:    req,
		Model:      model,
		Encode:     encodeRequest,
		Timeout:    p.timeout,
		Secret:     p.key,
		Fail:       failure,
		ReadStream: readStream,
		ReadWhole:  readResponse,
	})
}
