// Package schema compiles and enforces JSON Schemas: the parameters of
// agent tools and the output contracts of workflow stages.
//
// It wraps santhosh-tekuri/jsonschema v6 (skein's copy in
// internal/third_party/jsonschema), so every keyword of
// draft 2020-12 (and of the older drafts a schema names in "$schema") is
// enforced: type, enum, const, pattern, format, anyOf/oneOf/allOf/not,
// $ref/$defs, minimum/maximum, lengths, items, additionalProperties and the
// rest. A schema is compiled once; compiling fails when the schema itself
// is invalid, so a mistake in a schema is reported where it is written,
// not when a value is first checked.
//
// A schema is self-contained: "$ref" may point inside the schema ("#/$defs/x")
// or at the draft meta-schemas, never at files or URLs, which are refused
// at compile time.
//
// Values are decoded JSON as this project represents it: map[string]any,
// []any, string, bool, nil, and numbers as int64, float64 or json.Number.
package schema

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/skein-dev/skein/internal/third_party/jsonschema"
	"github.com/skein-dev/skein/internal/third_party/jsonschema/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// location is the URL a compiled schema is known by inside the compiler;
// it never appears in an error message.
const location = "skein:///schema.json"

// printer renders the library's messages in English. It holds no state
// that changes after it is made.
var printer = message.NewPrinter(language.English)

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	compiled *jsonschema.Schema
	doc      any // as given, to name the allowed properties in errors
}

// Compile compiles doc, a JSON Schema as a decoded JSON value (an object or
// a boolean). The error says what is wrong with the schema.
func Compile(doc any) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(location, doc); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", clean(err.Error()))
	}
	sch, err := c.Compile(location)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", compileMessage(err))
	}
	return &Schema{compiled: sch, doc: doc}, nil
}

// MustCompile is Compile for schemas written in the program: it panics
// when doc does not compile.
func MustCompile(doc any) *Schema {
	s, err := Compile(doc)
	if err != nil {
		panic(err)
	}
	return s
}

// Validate checks v against the schema. The error lists every violation,
// one per line, each as "<path>: <problem>", where path starts at root
// ("arguments", "output", ...) and names properties with dots and array
// elements with [i], as in "arguments.items[2]: got string, want number".
func (s *Schema) Validate(root string, v any) error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %v", root, err)
	}
	var lines []string
	seen := map[string]bool{}
	leaves(ve, func(e *jsonschema.ValidationError) {
		line := path(root, e.InstanceLocation) + ": " + describe(e)
		if _, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			line += s.expected(e.SchemaURL)
		}
		if !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	})
	if len(lines) == 0 {
		lines = append(lines, path(root, ve.InstanceLocation)+": "+describe(ve))
	}
	return &Error{Problems: lines}
}

// expected names the properties the schema at url (the location of a
// failed additionalProperties) declares: " (expected: a, b)", or "".
func (s *Schema) expected(url string) string {
	ptr, ok := strings.CutPrefix(url, location+"#")
	if !ok {
		return ""
	}
	node := s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := node.(map[string]any)
		if !ok {
			return ""
		}
		node = m[tok]
	}
	m, _ := node.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	if len(props) == 0 {
		return ""
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return " (expected: " + strings.Join(names, ", ") + ")"
}

// Validate compiles doc and checks v against it: for a schema used once.
func Validate(doc any, root string, v any) error {
	s, err := Compile(doc)
	if err != nil {
		return err
	}
	return s.Validate(root, v)
}

// Error is a failed validation: one line per violation.
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return strings.Join(e.Problems, "; ") }

// leaves calls f for each violation that has no more specific cause. For
// anyOf/oneOf the leaves of every branch are reported, so the reader sees
// why each alternative failed.
func leaves(e *jsonschema.ValidationError, f func(*jsonschema.ValidationError)) {
	if len(e.Causes) == 0 {
		f(e)
		return
	}
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		// Say which alternatives were tried, then why each failed.
		f(e)
	}
	for _, c := range e.Causes {
		leaves(c, f)
	}
}

// describe is one violation in words, without schema locations.
func describe(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		return fmt.Sprintf("missing required property %s", quoteAll(k.Missing))
	case *kind.AdditionalProperties:
		if len(k.Properties) == 1 {
			return fmt.Sprintf("unexpected property %s", quoteAll(k.Properties))
		}
		return fmt.Sprintf("unexpected properties %s", quoteAll(k.Properties))
	case *kind.MinLength:
		return fmt.Sprintf("is %d characters long, want at least %d", k.Got, k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("is %d characters long, want at most %d", k.Got, k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("has %d items, want at least %d", k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("has %d items, want at most %d", k.Got, k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("has %d properties, want at least %d", k.Got, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("has %d properties, want at most %d", k.Got, k.Want)
	case *kind.Minimum:
		return fmt.Sprintf("%s is less than the minimum %s", k.Got.RatString(), k.Want.RatString())
	case *kind.Maximum:
		return fmt.Sprintf("%s is more than the maximum %s", k.Got.RatString(), k.Want.RatString())
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s is not more than the exclusive minimum %s", k.Got.RatString(), k.Want.RatString())
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s is not less than the exclusive maximum %s", k.Got.RatString(), k.Want.RatString())
	case *kind.AnyOf:
		return "matches none of the anyOf alternatives:"
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return fmt.Sprintf("matches %d of the oneOf alternatives, want exactly one", len(k.Subschemas))
		}
		return "matches none of the oneOf alternatives:"
	}
	return clean(e.ErrorKind.LocalizedString(printer))
}

// path renders an instance location as root.a.b[2].
func path(root string, loc []string) string {
	var b strings.Builder
	b.WriteString(root)
	for _, tok := range loc {
		if isIndex(tok) {
			b.WriteString("[" + tok + "]")
		} else {
			b.WriteString("." + tok)
		}
	}
	return b.String()
}

func isIndex(tok string) bool {
	if tok == "" {
		return false
	}
	for _, r := range tok {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func quoteAll(names []string) string {
	names = append([]string(nil), names...)
	sort.Strings(names)
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// compileMessage explains why a schema does not compile: the first
// violation of the meta-schema, or the library's own message.
func compileMessage(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			var first string
			leaves(ve, func(e *jsonschema.ValidationError) {
				if first == "" {
					if _, ok := e.ErrorKind.(*kind.AnyOf); ok {
						return
					}
					first = path("schema", e.InstanceLocation) + ": " + describe(e)
				}
			})
			if first != "" {
				return first
			}
		}
		return clean(sve.Err.Error())
	}
	return clean(err.Error())
}

// clean removes the internal location from a library message.
func clean(s string) string {
	s = strings.ReplaceAll(s, "'"+location+"'", "the schema")
	s = strings.ReplaceAll(s, location+"#", "#")
	return strings.ReplaceAll(s, location, "the schema")
}

// refuseLoader refuses every external reference: schemas are
// self-contained.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not supported (put the definition under $defs)", strings.TrimPrefix(url, "skein:///"))
}
