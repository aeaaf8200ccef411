package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions/message"
)

// Result is a tool's result, mapped to skein's content model.
type Result struct {
	// Content is the result's content in the server's order: text blocks
	// (text content, and text naming audio, resource links and embedded
	// resources) and image blocks. A result with structured content and
	// no text has that content's JSON as its one text block.
	Content []message.Block
	// Data is the structured content, as a JSON value (nil: none).
	Data any
	// IsError reports the server's isError.
	IsError bool
}

// Text returns the result's text blocks joined by newlines.
func (r *Result) Text() string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == message.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Images returns the result's image blocks.
func (r *Result) Images() []message.Block {
	var out []message.Block
	for _, b := range r.Content {
		if b.Type == message.BlockImage {
			out = append(out, b)
		}
	}
	return out
}

// mapResult maps a tools/call result.
func mapResult(res *sdk.CallToolResult) (*Result, error) {
	r := &Result{IsError: res.IsError}
	hasText := false
	for _, c := range res.Content {
		var b message.Block
		switch c := c.(type) {
		case *sdk.TextContent:
			b = text(c.Text)
			hasText = true
		case *sdk.ImageContent:
			if !strings.HasPrefix(c.MIMEType, "image/") {
				b = text(fmt.Sprintf("[image of type %q, %d bytes, not shown]", c.MIMEType, len(c.Data)))
				break
			}
			b = message.Block{Type: message.BlockImage, MediaType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)}
		case *sdk.AudioContent:
			b = text(fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			b = text(describeLink(c))
		case *sdk.EmbeddedResource:
			b = text(describeEmbedded(c))
		default:
			data, _ := json.Marshal(c)
			b = text(fmt.Sprintf("[content %s]", data))
		}
		r.Content = append(r.Content, b)
	}
	if res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("structured content: %v", err)
		}
		if r.Data, err = jsonvalue.Decode(data); err != nil {
			return nil, fmt.Errorf("structured content: %v", err)
		}
		if !hasText {
			r.Content = append([]message.Block{text(string(data))}, r.Content...)
		}
	}
	return r, nil
}

func text(s string) message.Block { return message.Block{Type: message.BlockText, Text: s} }

// describeLink names a resource link: "[resource link: NAME <URI> (TYPE)]
// DESCRIPTION".
func describeLink(c *sdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	name := c.Title
	if name == "" {
		name = c.Name
	}
	if name != "" {
		b.WriteString(name + " ")
	}
	b.WriteString("<" + c.URI + ">")
	if c.MIMEType != "" {
		b.WriteString(" (" + c.MIMEType + ")")
	}
	b.WriteString("]")
	if c.Description != "" {
		b.WriteString(" " + c.Description)
	}
	return b.String()
}

// describeEmbedded names an embedded resource, followed by its text if
// it is a text resource.
func describeEmbedded(c *sdk.EmbeddedResource) string {
	rc := c.Resource
	if rc == nil {
		return "[resource]"
	}
	head := "[resource <" + rc.URI + ">"
	if rc.MIMEType != "" {
		head += " (" + rc.MIMEType + ")"
	}
	if rc.Blob != nil {
		return fmt.Sprintf("%s, %d bytes]", head, len(rc.Blob))
	}
	return head + "]\n" + rc.Text
}
