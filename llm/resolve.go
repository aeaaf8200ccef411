package llm

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/skein-dev/skein/internal/didyoumean"
	"github.com/skein-dev/skein/sessions/message"
)

// Provider names with a meaning of their own. Presets lists every named
// provider; any other name reaches an OpenAI-compatible server when a
// base URL is given.
const (
	ProviderMock             = "mock"
	ProviderOpenAI           = "openai"
	ProviderOpenAIResponses  = "openai_responses"
	ProviderAnthropic        = "anthropic"
	ProviderGemini           = "gemini"
	ProviderAzure            = "azure"
	ProviderOllama           = "ollama"
	ProviderOpenAICompatible = "openai_compatible"
)

// ProviderConfig is what a Factory needs to build a provider: the name and
// protocol, and the base URL and key already resolved from the base_url
// option, the environment and the preset.
type ProviderConfig struct {
	Name     string // as the script wrote it
	Protocol string // one of the Protocol* constants
	BaseURL  string // never empty
	APIKey   string // "" when none is set (and none is required)
	// APIVersion is Azure OpenAI's api-version: the option, else
	// AzureAPIVersionEnv ("" for the client's default; always "" for
	// other protocols).
	APIVersion string
	Getenv     func(string) string
	HTTPClient *http.Client
}

// Factory builds a real provider of one protocol.
type Factory func(ProviderConfig) (Provider, error)

// Settings are a VM's model defaults and the providers it can reach.
type Settings struct {
	// Provider and Model are the defaults (--provider / SKEIN_PROVIDER,
	// --model).
	Provider string
	Model    string
	// Getenv reads the environment (API keys, base URLs).
	Getenv func(string) string
	// HTTPClient is used by real providers (nil: their default).
	HTTPClient *http.Client
	// Factories build real providers by protocol (ProtocolOpenAI, ...).
	Factories map[string]Factory
	// Middleware, if set, wraps every real provider Build returns (the
	// --llm-record recorder).
	Middleware func(Provider) Provider
	// Redactor, if set, learns the API key of every provider Build makes
	// (named by its environment variable) and redacts every secret it
	// knows from their replies, before Middleware sees them.
	Redactor *message.Redactor
	// Prices prices the calls (DefaultPrices, or --prices FILE over it).
	Prices *Prices
	// Budget counts what every call of the run costs; its cap is
	// --max-cost-usd (nil: not counted).
	Budget *Budget
}

// openAIModel matches the OpenAI model names (compiled on first use).
var openAIModel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(gpt-|chatgpt-|o[1-9]($|-))`) })

// ErrNoProvider explains how to configure a provider. It names every
// way, the offline mock included.
var ErrNoProvider = fmt.Errorf("no provider configured: pass provider=\"mock\" for offline runs, or " +
	"provider=\"openai\"/\"anthropic\"/\"gemini\"/\"ollama\"/... or \"openai_compatible\" (with base_url), set --provider or SKEIN_PROVIDER, " +
	"use a claude-*, gpt-* or gemini-* model, or set ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY")

// ResolveName picks the provider of a call: the explicit name,
// then the VM default, then the model's name (claude-* is Anthropic;
// gpt-*, o1..o9 and chatgpt-* are OpenAI; gemini-* is Gemini), then
// whichever API key is set
// (Anthropic, then OpenAI, then Gemini). It returns ErrNoProvider when
// nothing applies.
func (s *Settings) ResolveName(explicit, model string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if s.Provider != "" {
		return s.Provider, nil
	}
	switch {
	case strings.HasPrefix(model, "claude-"):
		return ProviderAnthropic, nil
	case openAIModel().MatchString(model):
		return ProviderOpenAI, nil
	case strings.HasPrefix(model, "gemini-"):
		return ProviderGemini, nil
	}
	if s.getenv("ANTHROPIC_API_KEY") != "" {
		return ProviderAnthropic, nil
	}
	if s.getenv("OPENAI_API_KEY") != "" {
		return ProviderOpenAI, nil
	}
	if s.getenv("GEMINI_API_KEY") != "" || s.getenv("GOOGLE_API_KEY") != "" {
		return ProviderGemini, nil
	}
	return "", ErrNoProvider
}

func (s *Settings) getenv(k string) string {
	if s.Getenv == nil {
		return ""
	}
	return s.Getenv(k)
}

// AzureAPIVersionEnv is the environment variable of Azure OpenAI's
// api-version, used when the api_version option is not given.
const AzureAPIVersionEnv = "AZURE_OPENAI_API_VERSION"

// CheckAPIVersion refuses an api-version given to the provider name when
// it does not speak Azure OpenAI: it would do nothing.
func CheckAPIVersion(name, apiVersion string) error {
	if apiVersion == "" {
		return nil
	}
	if p, _ := LookupPreset(name); p.Protocol != ProtocolAzure {
		return fmt.Errorf("option 'api_version' is for Azure OpenAI only, not provider '%s'", name)
	}
	return nil
}

// Build constructs the real provider name (not the mock), wrapped in
// Middleware. apiVersion is Azure OpenAI's api-version ("" for
// AzureAPIVersionEnv, else the client's default); for any other provider
// it must be "".
func (s *Settings) Build(name, baseURL, apiVersion string) (Provider, error) {
	p, err := s.build(name, baseURL, apiVersion)
	if err != nil || s.Middleware == nil {
		return p, err
	}
	return s.Middleware(p), nil
}

// build resolves name through Presets (see LookupPreset): the protocol's
// factory gets the base URL (the baseURL argument, else the preset's
// environment variable, else its default) and the key (the first of the
// preset's key variables that is set). A hosted service without its key,
// and a name without a preset or a base URL, fail here, before any call.
func (s *Settings) build(name, baseURL, apiVersion string) (Provider, error) {
	if err := CheckAPIVersion(name, apiVersion); err != nil {
		return nil, err
	}
	preset, known := LookupPreset(name)
	f := s.Factories[preset.Protocol]
	if f == nil || (!known && baseURL == "" && name != ProviderOpenAICompatible) {
		known := append([]string{ProviderMock, ProviderOpenAICompatible}, PresetNames()...)
		sort.Strings(known)
		hint := ""
		if near := didyoumean.Closest(name, known); near != "" {
			hint = fmt.Sprintf("did you mean '%s'? ", near)
		}
		return nil, fmt.Errorf("unknown provider '%s' (%sexpected one of: %s, or any name with a base_url)", name, hint, strings.Join(known, ", "))
	}
	cfg := ProviderConfig{Name: name, Protocol: preset.Protocol, BaseURL: baseURL, Getenv: s.Getenv, HTTPClient: s.HTTPClient}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if preset.Protocol == ProtocolAzure {
		if cfg.APIVersion = apiVersion; cfg.APIVersion == "" {
			cfg.APIVersion = cfg.Getenv(AzureAPIVersionEnv)
		}
	}
	if cfg.BaseURL == "" && preset.BaseURLEnv != "" {
		cfg.BaseURL = cfg.Getenv(preset.BaseURLEnv)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = preset.BaseURL
	}
	if cfg.BaseURL == "" {
		if preset.BaseURLEnv != "" {
			return nil, fmt.Errorf("provider %s needs a base_url (or %s)", name, preset.BaseURLEnv)
		}
		return nil, fmt.Errorf("provider %q needs a base_url", name)
	}
	for _, k := range preset.KeyEnv {
		if cfg.APIKey = cfg.Getenv(k); cfg.APIKey != "" {
			s.Redactor.Add(k, cfg.APIKey)
			break
		}
	}
	if cfg.APIKey == "" && preset.KeyRequired {
		return nil, fmt.Errorf("provider %s: %s is not set", name, strings.Join(preset.KeyEnv, " or "))
	}
	p, err := f(cfg)
	if err != nil {
		return nil, err
	}
	return Redacting(p, s.Redactor), nil
}
