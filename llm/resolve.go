package llm

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// Provider names known to skein. Any other name reaches an
// OpenAI-compatible server when a base URL is given.
const (
	ProviderMock             = "mock"
	ProviderOpenAI           = "openai"
	ProviderAnthropic        = "anthropic"
	ProviderOllama           = "ollama"
	ProviderOpenAICompatible = "openai_compatible"
)

// ProviderConfig is what a Factory needs to build a provider.
type ProviderConfig struct {
	Name       string // as the script wrote it
	BaseURL    string // "" for the provider's default
	Getenv     func(string) string
	HTTPClient *http.Client
}

// Factory builds a real provider. It reads API keys through Getenv only.
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
	// Factories build real providers by name: "openai", "anthropic",
	// "ollama", and OpenAICompatible for every other name.
	Factories        map[string]Factory
	OpenAICompatible Factory
	// Middleware, if set, wraps every real provider Build returns (the
	// --llm-record recorder).
	Middleware func(Provider) Provider
}

var openAIModel = regexp.MustCompile(`^(gpt-|chatgpt-|o[1-9]($|-))`)

// ErrNoProvider explains how to configure a provider. It names every
// way, the offline mock included.
var ErrNoProvider = fmt.Errorf("no provider configured: pass provider=\"mock\" for offline runs, or " +
	"provider=\"openai\"/\"anthropic\"/\"ollama\"/\"openai_compatible\" (with base_url), set --provider or SKEIN_PROVIDER, " +
	"use a claude-* or gpt-* model, or set ANTHROPIC_API_KEY or OPENAI_API_KEY")

// ResolveName picks the provider of a call (API.md §4): the explicit name,
// then the VM default, then the model's name (claude-* is Anthropic;
// gpt-*, o1..o9 and chatgpt-* are OpenAI), then whichever API key is set
// (Anthropic first). It returns ErrNoProvider when nothing applies.
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
	case openAIModel.MatchString(model):
		return ProviderOpenAI, nil
	}
	if s.getenv("ANTHROPIC_API_KEY") != "" {
		return ProviderAnthropic, nil
	}
	if s.getenv("OPENAI_API_KEY") != "" {
		return ProviderOpenAI, nil
	}
	return "", ErrNoProvider
}

func (s *Settings) getenv(k string) string {
	if s.Getenv == nil {
		return ""
	}
	return s.Getenv(k)
}

// Build constructs the real provider name (not the mock), wrapped in
// Middleware.
func (s *Settings) Build(name, baseURL string) (Provider, error) {
	p, err := s.build(name, baseURL)
	if err != nil || s.Middleware == nil {
		return p, err
	}
	return s.Middleware(p), nil
}

func (s *Settings) build(name, baseURL string) (Provider, error) {
	cfg := ProviderConfig{Name: name, BaseURL: baseURL, Getenv: s.Getenv, HTTPClient: s.HTTPClient}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if f, ok := s.Factories[name]; ok {
		return f(cfg)
	}
	if s.OpenAICompatible != nil && (baseURL != "" || name == ProviderOpenAICompatible) {
		if baseURL == "" {
			return nil, fmt.Errorf("provider %q needs a base_url", name)
		}
		return s.OpenAICompatible(cfg)
	}
	known := []string{ProviderMock}
	for n := range s.Factories {
		known = append(known, n)
	}
	if s.OpenAICompatible != nil {
		known = append(known, ProviderOpenAICompatible)
	}
	sort.Strings(known)
	return nil, fmt.Errorf("unknown provider %q (expected one of: %s, or any name with a base_url)", name, strings.Join(known, ", "))
}
