package telemetrytest

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
)

// field is one decoded protobuf field.
type field struct {
	num   int
	wire  int
	u     uint64 // varint, fixed64, fixed32
	bytes []byte // length-delimited
}

// fields splits a protobuf message into its fields.
func fields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[n:]
		f := field{num: int(tag >> 3), wire: int(tag & 7)}
		switch f.wire {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, errors.New("bad varint")
			}
			f.u, b = v, b[n:]
		case 1:
			if len(b) < 8 {
				return nil, errors.New("short fixed64")
			}
			f.u, b = binary.LittleEndian.Uint64(b), b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, errors.New("bad length")
			}
			f.bytes, b = b[n:n+int(l)], b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return nil, errors.New("short fixed32")
			}
			f.u, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		default:
			return nil, fmt.Errorf("field %d: unsupported wire type %d", f.num, f.wire)
		}
		out = append(out, f)
	}
	return out, nil
}

// Decode reads an OTLP ExportTraceServiceRequest (collector/trace/v1)
// into flattened spans.
func Decode(data []byte) ([]Span, error) {
	req, err := fields(data)
	if err != nil {
		return nil, err
	}
	var spans []Span
	for _, rs := range req {
		if rs.num != 1 { // resource_spans
			continue
		}
		rsf, err := fields(rs.bytes)
		if err != nil {
			return nil, fmt.Errorf("resource_spans: %w", err)
		}
		res := map[string]any{}
		for _, f := range rsf {
			if f.num == 1 { // resource
				rf, err := fields(f.bytes)
				if err != nil {
					return nil, err
				}
				for _, a := range rf {
					if a.num == 1 {
						if err := keyValue(a.bytes, res); err != nil {
							return nil, err
						}
					}
				}
			}
		}
		for _, f := range rsf {
			if f.num != 2 { // scope_spans
				continue
			}
			ssf, err := fields(f.bytes)
			if err != nil {
				return nil, fmt.Errorf("scope_spans: %w", err)
			}
			scope := ""
			for _, g := range ssf {
				if g.num == 1 { // scope
					sf, err := fields(g.bytes)
					if err != nil {
						return nil, err
					}
					for _, h := range sf {
						if h.num == 1 {
							scope = string(h.bytes)
						}
					}
				}
			}
			for _, g := range ssf {
				if g.num != 2 { // spans
					continue
				}
				s, err := span(g.bytes)
				if err != nil {
					return nil, fmt.Errorf("span: %w", err)
				}
				s.Resource, s.Scope = res, scope
				spans = append(spans, s)
			}
		}
	}
	return spans, nil
}

func span(b []byte) (Span, error) {
	s := Span{Attrs: map[string]any{}}
	fs, err := fields(b)
	if err != nil {
		return s, err
	}
	for _, f := range fs {
		switch f.num {
		case 1:
			s.TraceID = hex.EncodeToString(f.bytes)
		case 2:
			s.SpanID = hex.EncodeToString(f.bytes)
		case 4:
			s.ParentID = hex.EncodeToString(f.bytes)
		case 5:
			s.Name = string(f.bytes)
		case 6:
			s.Kind = int(f.u)
		case 7:
			s.StartNano = f.u
		case 8:
			s.EndNano = f.u
		case 9:
			if err := keyValue(f.bytes, s.Attrs); err != nil {
				return s, err
			}
		case 11: // event
			ef, err := fields(f.bytes)
			if err != nil {
				return s, err
			}
			for _, e := range ef {
				if e.num == 2 {
					s.Events = append(s.Events, string(e.bytes))
				}
			}
		case 15: // status
			sf, err := fields(f.bytes)
			if err != nil {
				return s, err
			}
			for _, g := range sf {
				switch g.num {
				case 2:
					s.StatusMessage = string(g.bytes)
				case 3:
					s.StatusError = g.u == 2 // STATUS_CODE_ERROR
				}
			}
		}
	}
	return s, nil
}

// keyValue decodes a common/v1 KeyValue into m.
func keyValue(b []byte, m map[string]any) error {
	fs, err := fields(b)
	if err != nil {
		return err
	}
	var key string
	var val any
	for _, f := range fs {
		switch f.num {
		case 1:
			key = string(f.bytes)
		case 2:
			if val, err = anyValue(f.bytes); err != nil {
				return err
			}
		}
	}
	m[key] = val
	return nil
}

// anyValue decodes a common/v1 AnyValue: string, bool, int64, float64 or
// []any.
func anyValue(b []byte) (any, error) {
	fs, err := fields(b)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		switch f.num {
		case 1:
			return string(f.bytes), nil
		case 2:
			return f.u != 0, nil
		case 3:
			return int64(f.u), nil
		case 4:
			return math.Float64frombits(f.u), nil
		case 5:
			af, err := fields(f.bytes)
			if err != nil {
				return nil, err
			}
			out := []any{}
			for _, a := range af {
				v, err := anyValue(a.bytes)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		}
	}
	return nil, nil
}
