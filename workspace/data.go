package workspace

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// ReadJSONL reads a JSON Lines file (one JSON value per line, checked
// against the read scope) and returns its values in order. Blank lines
// are skipped and a UTF-8 byte order mark is ignored. Values are decoded
// as encoding/json decodes into an interface{} value, except that numbers
// are json.Number, so integers survive exactly (the caller converts them
// to int or float). A bad line is an error naming the file and the line:
// `data.jsonl:3: invalid JSON: ...`.
func (p *Policy) ReadJSONL(path string) ([]any, error) {
	t, err := p.resolve(path, accessRead)
	if err != nil {
		return nil, err
	}
	f, err := p.openWhole(t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values := []any{}
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, ioError("read", t, err)
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			v, derr := decodeJSONLine(trimmed)
			if derr != nil {
				return nil, fmt.Errorf("%s:%d: invalid JSON: %v", t.given, n, derr)
			}
			values = append(values, v)
		}
		if err == io.EOF {
			return values, nil
		}
	}
}

// decodeJSONLine decodes exactly one JSON value from line.
func decodeJSONLine(line []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("unexpected end of line")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one value on the line")
	}
	return v, nil
}

// ReadCSV reads a CSV file (RFC 4180, checked against the read scope)
// whose first row is the header, and returns the header and one map per
// following row from column name to field. Every row must have as many
// fields as the header, header names must be unique, and a UTF-8 byte
// order mark is ignored. An empty file has no header and no rows. A bad
// row is an error naming the file and the line: `data.csv:4: ...`.
func (p *Policy) ReadCSV(path string) (header []string, rows []map[string]string, err error) {
	t, err := p.resolve(path, accessRead)
	if err != nil {
		return nil, nil, err
	}
	f, err := p.openWhole(t)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, utf8BOM) {
		br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.ReuseRecord = false
	rows = []map[string]string{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return header, rows, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, nil, fmt.Errorf("%s:%d: %v", t.given, pe.Line, pe.Err)
			}
			return nil, nil, ioError("read", t, err)
		}
		if header == nil {
			for i, name := range rec {
				if slices.Contains(rec[:i], name) {
					line, _ := cr.FieldPos(i)
					return nil, nil, fmt.Errorf("%s:%d: duplicate column %q in the header", t.given, line, name)
				}
			}
			header = rec
			continue
		}
		row := make(map[string]string, len(header))
		for i, name := range header {
			row[name] = rec[i]
		}
		rows = append(rows, row)
	}
}
