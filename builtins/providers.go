package builtins

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/llm/openai"
)

// requestTimeout bounds one HTTP request to a real provider (a streamed
// reply included); an agent loop's timeout_s bounds the whole loop.
const requestTimeout = 5 * time.Minute

// DefaultLLM returns the provider settings of a VM: every real provider
// (openai, ollama, anthropic and OpenAI-compatible servers by any other
// name with a base_url), reading keys and base URLs through getenv only.
//
// Keys: OPENAI_API_KEY, ANTHROPIC_API_KEY, and for an OpenAI-compatible
// provider named NAME, NAME_API_KEY (upper-cased, '-' as '_'), if set.
// Base URLs: the base_url option, else OPENAI_BASE_URL,
// SKEIN_OLLAMA_BASE_URL, ANTHROPIC_BASE_URL.
func DefaultLLM(getenv func(string) string) *llm.Settings {
	return &llm.Settings{
		Getenv:     getenv,
		HTTPClient: providerClient(),
		Factories: map[string]llm.Factory{
			llm.ProviderOpenAI:    openAIFactory,
			llm.ProviderOllama:    openAIFactory,
			llm.ProviderAnthropic: anthropicFactory,
		},
		OpenAICompatible: openAIFactory,
	}
}

func openAIFactory(pc llm.ProviderConfig) (llm.Provider, error) {
	cfg := openai.ConfigFromEnv(pc.Name, pc.Getenv)
	if pc.BaseURL != "" {
		cfg.BaseURL = pc.BaseURL
	}
	switch pc.Name {
	case llm.ProviderOpenAI:
		if cfg.APIKey == "" {
			return nil, fmt.Errorf("provider openai: OPENAI_API_KEY is not set")
		}
	case llm.ProviderOllama:
	default:
		cfg.APIKey = pc.Getenv(keyVar(pc.Name))
	}
	cfg.HTTPClient, cfg.Timeout = pc.HTTPClient, requestTimeout
	return openai.New(cfg)
}

func anthropicFactory(pc llm.ProviderConfig) (llm.Provider, error) {
	cfg := anthropic.ConfigFromEnv(pc.Getenv)
	if pc.BaseURL != "" {
		cfg.BaseURL = pc.BaseURL
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("provider anthropic: ANTHROPIC_API_KEY is not set")
	}
	cfg.HTTPClient, cfg.Timeout = pc.HTTPClient, requestTimeout
	return anthropic.New(cfg)
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

// keyVar is the environment variable holding the key of an
// OpenAI-compatible provider: "groq" -> GROQ_API_KEY.
func keyVar(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"
}
