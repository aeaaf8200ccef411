package mock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
)

// Recorder writes every call a real provider answers as one fixture line
// (the format LoadFixture reads), so a pipeline recorded once against a
// real model replays offline: --llm-record. Failures the provider
// reported are recorded as `error` entries, so retries replay too.
// Each line keeps the request it answered under a `request` key (its
// normalised form and fingerprint, which strict replay checks); nothing of
// the provider's configuration (keys, base URLs) is written.
type Recorder struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewRecorder returns a recorder writing to w.
func NewRecorder(w io.Writer) *Recorder { return &Recorder{w: w} }

// Err returns the first write error, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Wrap returns p with its calls recorded.
func (r *Recorder) Wrap(p llm.Provider) llm.Provider { return &recorded{Provider: p, rec: r} }

type recorded struct {
	llm.Provider
	rec *Recorder
}

func (p *recorded) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := p.Provider.Complete(ctx, req)
	if ctx.Err() != nil {
		return resp, err // a cancelled call is not part of the conversation
	}
	line := map[string]any{}
	if err == nil {
		line, err = responseFields(resp)
		if err != nil {
			return resp, err
		}
	} else if e, ok := llm.AsError(err); ok {
		f := map[string]any{"category": string(e.Category), "message": e.Message}
		if e.RetryAfter > 0 {
			f["retry_after_ms"] = e.RetryAfter.Milliseconds()
		}
		line["error"] = f
	} else {
		return resp, err
	}
	request := RequestShape(req)
	request["fingerprint"] = Fingerprint(request)
	request["provider"] = p.Name()
	line[RequestKey] = request
	p.rec.write(line)
	return resp, err
}

func responseFields(resp *llm.Response) (map[string]any, error) {
	data, err := FixtureLine(resp)
	if err != nil {
		return nil, err
	}
	return jsonvalue.DecodeObject(data)
}

func (r *Recorder) write(line map[string]any) {
	data, err := json.Marshal(line)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if err == nil {
		_, err = r.w.Write(append(data, '\n'))
	}
	if err != nil {
		r.err = errors.Join(errors.New("llm record"), err)
	}
}
