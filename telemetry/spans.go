package telemetry

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// GenAI semantic-convention attribute keys (and skein's own, under
// skein.*) that the spans carry.
const (
	KeyOperation      = "gen_ai.operation.name"
	KeyProvider       = "gen_ai.provider.name"
	KeyRequestModel   = "gen_ai.request.model"
	KeyResponseModel  = "gen_ai.response.model"
	KeyInputTokens    = "gen_ai.usage.input_tokens"
	KeyOutputTokens   = "gen_ai.usage.output_tokens"
	KeyFinishReasons  = "gen_ai.response.finish_reasons"
	KeyConversationID = "gen_ai.conversation.id"
	KeyAgentName      = "gen_ai.agent.name"
	KeyToolName       = "gen_ai.tool.name"
	KeyToolCallID     = "gen_ai.tool.call.id"
	KeyToolType       = "gen_ai.tool.type"
	KeyErrorType      = "error.type"
	KeyTemperature    = "gen_ai.request.temperature"
	KeyMaxTokens      = "gen_ai.request.max_tokens"
	KeyWorkflowName   = "skein.workflow.name"
	KeyWorkflowRun    = "skein.workflow.run_id"
	KeyStage          = "skein.workflow.stage"
	KeyStageKind      = "skein.workflow.stage_kind"

	// Content, recorded only when CaptureContent is on.
	KeySystemInstructions = "gen_ai.system_instructions"
	KeyInputMessages      = "gen_ai.input.messages"
	KeyOutputMessages     = "gen_ai.output.messages"
	KeyToolArguments      = "gen_ai.tool.call.arguments"
	KeyToolResult         = "gen_ai.tool.call.result"
)

// Operation names (gen_ai.operation.name) and span name prefixes.
const (
	OpWorkflow = "invoke_workflow"
	OpStage    = "stage"
	OpAgent    = "invoke_agent"
	OpChat     = "chat"
	OpTool     = "execute_tool"
)

// Span is one started span. Its zero value (what the helpers return when
// the context carries no Tracer) does nothing.
type Span struct {
	span    *span
	content bool
}

// start starts a span of kind named "op name" (op alone when name is
// empty), and returns its recorder and
// record, locked, when it records (the helper sets its attributes with
// the recorder's set* methods, then unlocks it), else a nil record.
//
// The helpers set their attributes right after the start (the samplers
// OTEL_TRACES_SAMPLER chooses do not read them), straight into the
// span's record, encoded (attrs.go).
func start(ctx context.Context, t *Tracer, op, name string, kind trace.SpanKind) (context.Context, Span, *recorder, *record) {
	r := t.recorder()
	if r == nil {
		return ctx, Span{}, nil, nil
	}
	ctx, s, d := r.start(ctx, t, op, name, kind, nil)
	return ctx, Span{span: s, content: t.content}, r, d
}

// record locks and returns the span's record while it records (its
// attributes are set with its recorder's set* methods), else returns
// nil.
func (s Span) record() (*recorder, *record) {
	if d := s.span.lock(); d != nil {
		return s.span.r, d
	}
	return nil, nil
}

// Workflow starts the span of a workflow run: "invoke_workflow NAME".
func Workflow(ctx context.Context, name, runID string) (context.Context, Span) {
	t := From(ctx)
	if t == nil {
		return ctx, Span{}
	}
	ctx, s, r, d := start(ctx, t, OpWorkflow, name, trace.SpanKindInternal)
	if d != nil {
		r.setFixed(d, KeyOperation, fieldOpWorkflow)
		r.setString(d, KeyWorkflowName, name)
		r.setString(d, KeyWorkflowRun, runID)
		d.mu.Unlock()
	}
	return ctx, s
}

// Stage starts the span of one workflow stage: "stage NODE".
func Stage(ctx context.Context, node, kind, sessionID string) (context.Context, Span) {
	t := From(ctx)
	if t == nil {
		return ctx, Span{}
	}
	ctx, s, r, d := start(ctx, t, OpStage, node, trace.SpanKindInternal)
	if d != nil {
		r.setFixed(d, KeyOperation, fieldOpStage)
		r.setString(d, KeyStage, node)
		r.setString(d, KeyStageKind, kind)
		if sessionID != "" {
			r.setString(d, KeyConversationID, sessionID)
		}
		d.mu.Unlock()
	}
	return ctx, s
}

// Agent starts the span of an agent loop: "invoke_agent AGENT" (or
// "invoke_agent" for a loop of no named agent).
func Agent(ctx context.Context, agent, sessionID, provider, model string) (context.Context, Span) {
	t := From(ctx)
	if t == nil {
		return ctx, Span{}
	}
	if agent == "" {
		agent, _ = ctx.Value(agentKey{}).(string)
	}
	ctx, s, r, d := start(ctx, t, OpAgent, agent, trace.SpanKindInternal)
	if d != nil {
		r.setFixed(d, KeyOperation, fieldOpAgent)
		r.setString(d, KeyConversationID, sessionID)
		if agent != "" {
			r.setString(d, KeyAgentName, agent)
		}
		if provider != "" {
			r.setString(d, KeyProvider, ProviderName(provider))
		}
		if model != "" {
			r.setString(d, KeyRequestModel, model)
		}
		d.mu.Unlock()
	}
	return ctx, s
}

// ChatRequest is what a chat span records of a model call before it is
// made.
type ChatRequest struct {
	SessionID, Provider, Model string
	Temperature                *float64
	MaxTokens                  int
}

// Chat starts the span of one model call: "chat MODEL", a client span.
func Chat(ctx context.Context, req ChatRequest) (context.Context, Span) {
	t := From(ctx)
	if t == nil {
		return ctx, Span{}
	}
	ctx, s, r, d := start(ctx, t, OpChat, req.Model, trace.SpanKindClient)
	if d != nil {
		r.setFixed(d, KeyOperation, fieldOpChat)
		r.setString(d, KeyConversationID, req.SessionID)
		if req.Provider != "" {
			r.setString(d, KeyProvider, ProviderName(req.Provider))
		}
		if req.Model != "" {
			r.setString(d, KeyRequestModel, req.Model)
		}
		if req.Temperature != nil {
			kv := attribute.Float64(KeyTemperature, *req.Temperature)
			r.setAttr(d, &kv)
		}
		if req.MaxTokens > 0 {
			r.setInt(d, KeyMaxTokens, int64(req.MaxTokens))
		}
		d.mu.Unlock()
	}
	return ctx, s
}

// ChatResponse is what a chat span records of the reply.
type ChatResponse struct {
	// Provider answered; RequestProvider was asked first (the span's
	// gen_ai.provider.name is replaced only when they differ).
	Provider, RequestProvider string
	Model                     string
	InputTokens, OutputTokens int
	FinishReason              string
}

// Replied records a model call's reply on its chat span.
func (s *Span) Replied(resp ChatResponse) {
	r, d := s.record()
	if d == nil {
		return
	}
	if resp.Provider != "" && resp.Provider != resp.RequestProvider {
		// a fallback answered: the provider that did
		r.setString(d, KeyProvider, ProviderName(resp.Provider))
	}
	if resp.Model != "" {
		r.setString(d, KeyResponseModel, resp.Model)
	}
	r.setInt(d, KeyInputTokens, int64(resp.InputTokens))
	r.setInt(d, KeyOutputTokens, int64(resp.OutputTokens))
	if resp.FinishReason != "" {
		// llm's stop reasons are encoded once (a slice attribute would
		// be copied through reflection)
		if i := slices.Index(stopReasons[:], resp.FinishReason); i >= 0 {
			r.setFixed(d, KeyFinishReasons, fieldStopReasons[i])
		} else {
			kv := attribute.StringSlice(KeyFinishReasons, []string{resp.FinishReason})
			r.setAttr(d, &kv)
		}
	}
	d.mu.Unlock()
}

// Tool starts the span of one tool call: "execute_tool NAME". (Its
// session is its invoke_agent span's gen_ai.conversation.id: a tool
// span carries no more than it needs, since a loop of quick tools makes
// one per iteration.)
func Tool(ctx context.Context, name, callID string) (context.Context, Span) {
	t := From(ctx)
	if t == nil {
		return ctx, Span{}
	}
	ctx, s, r, d := start(ctx, t, OpTool, name, trace.SpanKindInternal)
	if d != nil {
		r.setFixed(d, KeyOperation, fieldOpTool)
		r.setString(d, KeyToolName, name)
		r.setString(d, KeyToolCallID, callID)
		r.setFixed(d, KeyToolType, fieldToolFunction)
		d.mu.Unlock()
	}
	return ctx, s
}

// Recording reports whether the span records anything (false for the
// zero Span and for a span the sampler dropped).
func (s Span) Recording() bool { return s.span != nil && s.span.IsRecording() }

// CaptureContent reports whether message content should be recorded on
// the span (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). A
// caller builds the content only then.
func (s Span) CaptureContent() bool { return s.content && s.Recording() }

// SetContent records content (a KeySystemInstructions,
// KeyInputMessages, ... value) when CaptureContent is on.
func (s Span) SetContent(key, value string) {
	if s.content {
		s.SetString(key, value)
	}
}

// SetString sets a string attribute.
func (s Span) SetString(key, value string) {
	if r, d := s.record(); d != nil {
		r.setString(d, key, value)
		d.mu.Unlock()
	}
}

// End ends the span; a non-nil err sets its status to Error with err's
// text, records err as an exception event and sets error.type (errType,
// or "_OTHER" when empty).
func (s Span) End(err error, errType string) {
	if s.span == nil {
		return
	}
	if err != nil {
		switch {
		case errType != "":
		case errors.Is(err, context.Canceled):
			errType = "cancelled"
		default:
			errType = "_OTHER"
		}
		s.SetString(KeyErrorType, errType)
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// ProviderName maps a skein provider name to gen_ai.provider.name's
// well-known value where there is one.
func ProviderName(p string) string {
	switch p {
	case "gemini":
		return "gcp.gemini"
	case "azure":
		return "azure.ai.openai"
	case "openai_responses":
		return "openai"
	}
	return p
}

// Inject writes the W3C traceparent (and tracestate) of ctx's current
// span into h; it writes nothing when ctx has no valid span context.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx continuing the W3C trace context h carries (a
// traceparent header), or ctx unchanged when it carries none.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}
