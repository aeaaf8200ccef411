// Package providers builds skein's real model providers: one factory
// per wire protocol (OpenAI chat completions and Azure OpenAI, OpenAI
// responses, Anthropic messages, Gemini), so that every name of
// llm.Presets, and any other name with a base URL, can be reached.
package providers

import (
	"net/http"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/llm/gemini"
	"github.com/skein-dev/skein/llm/openai"
	"github.com/skein-dev/skein/llm/openairesponses"
)

// requestTimeout bounds one HTTP request to a real provider (a streamed
// reply included); an agent loop's timeout_s bounds the whole loop.
const requestTimeout = 5 * time.Minute

// Default returns the provider settings of a VM: a factory per wire
// protocol, so that every name of llm.Presets (and any other name with a
// base_url, as an OpenAI-compatible server) can be built. Keys and base
// URLs are read through getenv only, as the presets say.
func Default(getenv func(string) string) *llm.Settings {
	return &llm.Settings{
		Getenv:     getenv,
		HTTPClient: providerClient(),
		Prices:     llm.DefaultPrices(),
		Budget:     &llm.Budget{},
		Factories: map[string]llm.Factory{
			llm.ProtocolOpenAI:          openAIFactory,
			llm.ProtocolAzure:           openAIFactory,
			llm.ProtocolOpenAIResponses: responsesFactory,
			llm.ProtocolAnthropic:       anthropicFactory,
			llm.ProtocolGemini:          geminiFactory,
		},
	}
}

func openAIFactory(pc llm.ProviderConfig) (llm.Provider, error) {
	cfg := openai.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, HTTPClient: pc.HTTPClient, Timeout: requestTimeout}
	if pc.Protocol == llm.ProtocolAzure {
		cfg.Name, cfg.APIVersion = openai.NameAzure, pc.APIVersion
	}
	return openai.New(cfg)
}

func responsesFactory(pc llm.ProviderConfig) (llm.Provider, error) {
	return openairesponses.New(openairesponses.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, HTTPClient: pc.HTTPClient, Timeout: requestTimeout})
}

func geminiFactory(pc llm.ProviderConfig) (llm.Provider, error) {
	return gemini.New(gemini.Config{BaseURL: pc.BaseURL, APIKey: pc.APIKey, HTTPClient: pc.HTTPClient, Timeout: requestTimeout})
}

func anthropicFactory(pc llm.ProviderConfig) (llm.Provider, error) {
	return anthropic.New(anthropic.Config{BaseURL: pc.BaseURL, APIKey: pc.APIKey, HTTPClient: pc.HTTPClient, Timeout: requestTimeout})
}

// providerClient is the HTTP client of a VM's real providers: the default
// transport, keeping enough idle connections per host that many
// concurrent agent loops against one provider reuse their connections
// instead of reconnecting for every call (Go's default keeps two).
func providerClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}
