package llm

import (
	"sort"
	"strings"
)

// Wire protocols: the clients a provider name can be reached through.
const (
	ProtocolOpenAI          = "openai"           // OpenAI Chat Completions (llm/openai)
	ProtocolOpenAIResponses = "openai_responses" // OpenAI Responses (llm/openairesponses)
	ProtocolAnthropic       = "anthropic"        // Anthropic Messages (llm/anthropic)
	ProtocolGemini          = "gemini"           // Google Generative Language (llm/gemini)
	ProtocolAzure           = "azure"            // Azure OpenAI chat completions (llm/openai)
)

// Preset is a provider skein knows by name: the protocol it speaks, its
// default base URL, and where its key and base URL come from in the
// environment.
type Preset struct {
	Name     string
	Protocol string
	// BaseURL is the default API root; "" when the user must give one
	// (base_url, or BaseURLEnv).
	BaseURL string
	// BaseURLEnv, if set, is the environment variable that overrides
	// BaseURL (the base_url option overrides both).
	BaseURLEnv string
	// KeyEnv lists the environment variables holding the API key; the
	// first one set wins.
	KeyEnv []string
	// KeyRequired makes a missing key an error before any call (hosted
	// services); local servers run without one.
	KeyRequired bool
}

// Presets is the table of named providers: the native APIs, Azure OpenAI
// and the OpenAI-compatible services. docs/providers.md shows it; a test
// keeps the two in step. Any other name reaches an OpenAI-compatible
// server when a base_url is given, with its key in NAME_API_KEY.
var Presets = []Preset{
	{Name: ProviderOpenAI, Protocol: ProtocolOpenAI, BaseURL: "https://api.openai.com/v1", BaseURLEnv: "OPENAI_BASE_URL", KeyEnv: []string{"OPENAI_API_KEY"}, KeyRequired: true},
	{Name: ProviderOpenAIResponses, Protocol: ProtocolOpenAIResponses, BaseURL: "https://api.openai.com/v1", BaseURLEnv: "OPENAI_BASE_URL", KeyEnv: []string{"OPENAI_API_KEY"}, KeyRequired: true},
	{Name: ProviderAnthropic, Protocol: ProtocolAnthropic, BaseURL: "https://api.anthropic.com", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: []string{"ANTHROPIC_API_KEY"}, KeyRequired: true},
	{Name: ProviderGemini, Protocol: ProtocolGemini, BaseURL: "https://generativelanguage.googleapis.com", BaseURLEnv: "GEMINI_BASE_URL", KeyEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, KeyRequired: true},
	{Name: ProviderAzure, Protocol: ProtocolAzure, BaseURLEnv: "AZURE_OPENAI_ENDPOINT", KeyEnv: []string{"AZURE_OPENAI_API_KEY"}, KeyRequired: true},
	{Name: "openrouter", Protocol: ProtocolOpenAI, BaseURL: "https://openrouter.ai/api/v1", KeyEnv: []string{"OPENROUTER_API_KEY"}, KeyRequired: true},
	{Name: "groq", Protocol: ProtocolOpenAI, BaseURL: "https://api.groq.com/openai/v1", KeyEnv: []string{"GROQ_API_KEY"}, KeyRequired: true},
	{Name: "together", Protocol: ProtocolOpenAI, BaseURL: "https://api.together.xyz/v1", KeyEnv: []string{"TOGETHER_API_KEY"}, KeyRequired: true},
	{Name: "deepseek", Protocol: ProtocolOpenAI, BaseURL: "https://api.deepseek.com/v1", KeyEnv: []string{"DEEPSEEK_API_KEY"}, KeyRequired: true},
	{Name: "mistral", Protocol: ProtocolOpenAI, BaseURL: "https://api.mistral.ai/v1", KeyEnv: []string{"MISTRAL_API_KEY"}, KeyRequired: true},
	{Name: "fireworks", Protocol: ProtocolOpenAI, BaseURL: "https://api.fireworks.ai/inference/v1", KeyEnv: []string{"FIREWORKS_API_KEY"}, KeyRequired: true},
	{Name: "xai", Protocol: ProtocolOpenAI, BaseURL: "https://api.x.ai/v1", KeyEnv: []string{"XAI_API_KEY"}, KeyRequired: true},
	{Name: ProviderOllama, Protocol: ProtocolOpenAI, BaseURL: "http://localhost:11434/v1", BaseURLEnv: "SKEIN_OLLAMA_BASE_URL", KeyEnv: []string{"OLLAMA_API_KEY"}},
	{Name: "lmstudio", Protocol: ProtocolOpenAI, BaseURL: "http://localhost:1234/v1", KeyEnv: []string{"LMSTUDIO_API_KEY"}},
	{Name: "vllm", Protocol: ProtocolOpenAI, BaseURL: "http://localhost:8000/v1", KeyEnv: []string{"VLLM_API_KEY"}},
	{Name: "llamacpp", Protocol: ProtocolOpenAI, BaseURL: "http://localhost:8080/v1", KeyEnv: []string{"LLAMACPP_API_KEY"}},
}

// LookupPreset returns the preset of a provider name. A name without one
// is an OpenAI-compatible server (ProviderOpenAICompatible or any other
// name), which needs a base URL: the returned preset has none and takes
// its key from NAME_API_KEY (upper-cased, '-' as '_'); ok is false.
func LookupPreset(name string) (p Preset, ok bool) {
	for _, p := range Presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{Name: name, Protocol: ProtocolOpenAI, KeyEnv: []string{KeyVar(name)}}, false
}

// KeyVar is the environment variable of a provider's key: "groq" ->
// GROQ_API_KEY.
func KeyVar(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"
}

// PresetNames returns the names of every preset, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for _, p := range Presets {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}
