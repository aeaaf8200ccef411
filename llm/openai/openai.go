// Package openai is skein's client for the OpenAI Chat Completions API
// (POST {base}/chat/completions), written on net/http and encoding/json.
// It implements llm.Provider for OpenAI itself, for Azure OpenAI (name
// "azure": deployment URLs, the api-version parameter and the api-key
// header) and for every server that speaks the same protocol: Ollama,
// vLLM, llama.cpp, LM Studio, hosted services and gateways.
//
// A Provider maps an llm.Request onto the wire format (request.go), reads
// the reply as one JSON body or as a stream of server-sent events
// (response.go), and reports failures as categorised *llm.Error values
// in the error format OpenAI shares across its APIs
// (llm/internal/openaiwire). The API key is sent in the Authorization
// header (Azure: api-key) only and never appears in an error.
package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/openaiwire"
	"github.com/skein-dev/skein/llm/internal/wire"
)

// Provider names with defaults of their own.
const (
	NameOpenAI     = "openai"
	NameOllama     = "ollama"
	NameCompatible = "openai_compatible"
	NameAzure      = "azure"
)

// DefaultAzureAPIVersion is the api-version sent to Azure OpenAI when the
// configuration names none.
const DefaultAzureAPIVersion = "2024-10-21"

// Default base URLs.
const (
	DefaultBaseURL = "https://api.openai.com/v1"
	OllamaBaseURL  = "http://localhost:11434/v1"
)

// RawArgumentsKey is the only key of a tool call's arguments when the
// model sent arguments that are not a JSON object (invalid JSON, or JSON
// cut short at the token limit): the call is returned with the text under
// this key rather than failing the model call, so that the agent loop can
// answer it with an error result and the model can try again.
const RawArgumentsKey = wire.RawArgumentsKey

// Config configures a Provider.
type Config struct {
	// Name is the provider's name as scripts write it: "openai" (the
	// default), "ollama", "openai_compatible" or another name given to an
	// OpenAI-compatible server.
	Name string
	// BaseURL is the API root the path /chat/completions is appended to.
	// Empty: DefaultBaseURL for "openai", OllamaBaseURL for "ollama"; any
	// other name requires it.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// HTTPClient makes the requests (default: a client with no timeout of
	// its own, on http.DefaultTransport).
	HTTPClient *http.Client
	// Timeout bounds each call, the whole streamed reply included (0: no
	// limit beyond the caller's context). Expiry is a `timeout` error.
	Timeout time.Duration
	// APIVersion is Azure's api-version (default DefaultAzureAPIVersion);
	// other servers ignore it.
	APIVersion string
}

// Provider is an llm.Provider speaking OpenAI Chat Completions. It is safe
// for concurrent use.
type Provider struct {
	name    string
	url     string
	key     string
	client  *http.Client
	timeout time.Duration
	// azure: url is the resource endpoint; the deployment (the model) and
	// the api-version are added per call, and the key goes in api-key.
	azure      bool
	apiVersion string
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg. It fails when the base URL is missing
// (for names without a default) or is not an http(s) URL.
func New(cfg Config) (*Provider, error) {
	name := cfg.Name
	if name == "" {
		name = NameOpenAI
	}
	base := cfg.BaseURL
	if base == "" {
		switch name {
		case NameOpenAI:
			base = DefaultBaseURL
		case NameOllama:
			base = OllamaBaseURL
		case NameAzure:
			return nil, fmt.Errorf("%s: a base url (the resource endpoint, https://NAME.openai.azure.com) is required", name)
		default:
			return nil, fmt.Errorf("%s: a base url is required for an openai-compatible provider", name)
		}
	}
	base, err := wire.Endpoint(name, base, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		name:    name,
		url:     base + "/chat/completions",
		key:     cfg.APIKey,
		client:  cfg.HTTPClient,
		timeout: cfg.Timeout,
	}
	if name == NameAzure {
		p.azure, p.url, p.apiVersion = true, base, cfg.APIVersion
		if p.apiVersion == "" {
			p.apiVersion = DefaultAzureAPIVersion
		}
	}
	return p, nil
}

// Name returns the provider's configured name.
func (p *Provider) Name() string { return p.name }

// Complete performs one chat completion, streaming when req.Stream is set
// (text and reasoning deltas go to req.OnDelta as they arrive).
// Cancelling ctx aborts the call and returns ctx's error; every other
// failure is an *llm.Error.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	h := http.Header{}
	target := p.url
	switch {
	case p.azure:
		// {endpoint}/openai/deployments/{deployment}/chat/completions
		target += "/openai/deployments/" + url.PathEscape(req.Model) + "/chat/completions?api-version=" + url.QueryEscape(p.apiVersion)
		if p.key != "" {
			h.Set("api-key", p.key)
		}
	case p.key != "":
		h.Set("Authorization", "Bearer "+p.key)
	}
	return wire.Do(ctx, &wire.Call{
		Provider:   p.name,
		Client:     p.client,
		URL:        target,
		Header:     h,
		Request:    req,
		Model:      req.Model,
		Encode:     p.encodeRequest,
		Timeout:    p.timeout,
		Secret:     p.key,
		Fail:       openaiwire.Failure,
		ReadStream: readStream,
		ReadWhole:  readCompletion,
	})
}
