package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/schema"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// DefaultOutputRetries is how many repair turns a reply that does not
// match its output schema gets by default.
const DefaultOutputRetries = 2

// EventOutputInvalid records a reply that did not match the output
// schema, before its repair turn: {attempt, problems}.
const EventOutputInvalid = "output_invalid"

// Output is a loop's structured output: every model call asks for a reply
// matching the schema in the provider's native form (llm.Output), and the
// final reply is parsed as JSON and validated here whatever the provider
// did. A reply that fails gets a repair turn — a user message quoting the
// violations and the schema — up to Retries times; the parsed value is
// Result.Output. A reply that calls tools is not checked: the loop goes
// on (llm_call returns it as it is).
type Output struct {
	llm.Output
	// Retries is the number of repair turns (0: DefaultOutputRetries;
	// negative: none).
	Retries int
	schema  *schema.Schema
}

// NewOutput compiles doc, a JSON Schema object, into an Output; the error
// says what is wrong with the schema.
func NewOutput(doc map[string]any, retries int) (*Output, error) {
	s, err := schema.Compile(doc)
	if err != nil {
		return nil, err
	}
	return &Output{Output: llm.Output{Schema: doc}, Retries: retries, schema: s}, nil
}

// retries is the number of repair turns allowed.
func (o *Output) retries() int {
	switch {
	case o.Retries == 0:
		return DefaultOutputRetries
	case o.Retries < 0:
		return 0
	}
	return o.Retries
}

// Parse reads a reply's text as the output: one JSON value (a Markdown
// code fence around it is allowed), valid against the schema. The error
// is a *schema.Error listing each violation as "output<path>: <problem>".
func (o *Output) Parse(text string) (any, error) {
	body := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(body, "```"); ok && strings.HasSuffix(rest, "```") {
		rest = strings.TrimSuffix(rest, "```")
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.ContainsAny(rest[:nl], "{[\"") {
			rest = rest[nl+1:] // the fence's language tag
		}
		body = strings.TrimSpace(rest)
	}
	if body == "" {
		return nil, &schema.Error{Problems: []string{"output: the reply is empty, want a JSON value"}}
	}
	v, err := jsonvalue.Decode([]byte(body))
	if err != nil {
		return nil, &schema.Error{Problems: []string{"output: the reply is not JSON: " + err.Error()}}
	}
	if err := o.schema.Validate("output", v); err != nil {
		return nil, err
	}
	return v, nil
}

// OutputError is returned when the final reply still does not match the
// output schema after every repair turn.
type OutputError struct {
	Repairs  int      // repair turns made
	Problems []string // the last reply's violations, "<path>: <problem>" each
}

func (e *OutputError) Error() string {
	turns := "repair turns"
	if e.Repairs == 1 {
		turns = "repair turn"
	}
	return fmt.Sprintf("output_schema: the reply does not match the schema after %d %s: %s", e.Repairs, turns, strings.Join(e.Problems, "; "))
}

// problems lists the violations of a Parse error.
func problems(err error) []string {
	if se, ok := err.(*schema.Error); ok {
		return se.Problems
	}
	return []string{err.Error()}
}

// repairMessage is the user message of a repair turn: the violations,
// then the schema.
func (o *Output) repairMessage(probs []string, attempt int) message.Message {
	var b strings.Builder
	b.WriteString("Your reply does not match the required JSON Schema:\n")
	for _, p := range probs {
		b.WriteString("- ")
		b.WriteString(p)
		b.WriteByte('\n')
	}
	var schemaText bytes.Buffer
	enc := json.NewEncoder(&schemaText)
	enc.SetEscapeHTML(false)
	if enc.Encode(o.Schema) == nil {
		b.WriteString("The schema: ")
		b.WriteString(strings.TrimSpace(schemaText.String()))
		b.WriteByte('\n')
	}
	b.WriteString("Reply again with only the corrected JSON value.")
	return message.Message{Role: message.RoleUser, Text: b.String(), Metadata: map[string]any{"output_repair": int64(attempt)}}
}

// checkOutput validates a final reply's text. It returns true when the
// reply is accepted (Result.Output is set) and false when a repair turn
// was staged; the error is an *OutputError when no repair turn is left.
func (l *loop) checkOutput(text string) (bool, error) {
	o := l.cfg.Output
	v, err := o.Parse(text)
	if err == nil {
		l.res.Output = v
		return true, nil
	}
	probs := problems(err)
	if l.res.OutputRepairs >= o.retries() {
		return false, &OutputError{Repairs: l.res.OutputRepairs, Problems: probs}
	}
	l.res.OutputRepairs++
	list := make([]any, len(probs))
	for i, p := range probs {
		list[i] = p
	}
	ev := sessions.NewEvent(EventOutputInvalid, map[string]any{"attempt": int64(l.res.OutputRepairs), "problems": list})
	return false, l.stage(&sessions.Change{Append: []message.Message{o.repairMessage(probs, l.res.OutputRepairs)}, Events: []sessions.Event{ev}})
}
