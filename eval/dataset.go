package eval

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// ParseDataset reads the cases of a dataset file named name (its
// extension gives the format): JSONL (.jsonl, .ndjson: one JSON object per
// line, blank lines skipped) or CSV (.csv: a header row naming the
// columns, then one case per row, every value a string). A UTF-8 byte
// order mark is ignored. Errors name the file and the case (its number,
// from 1, and its line).
func ParseDataset(name string, data []byte) ([]map[string]any, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".jsonl", ".ndjson":
		return parseJSONL(name, data)
	case ".csv":
		return parseCSV(name, data)
	default:
		return nil, fmt.Errorf("%s: unknown dataset format '%s' (expected .jsonl, .ndjson or .csv)", name, ext)
	}
}

func parseJSONL(path string, data []byte) ([]map[string]any, error) {
	var cases []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		v, err := jsonvalue.Decode(text)
		if err != nil {
			return nil, fmt.Errorf("%s: case %d (line %d): %v", path, len(cases)+1, line, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: case %d (line %d): got %s, want a JSON object", path, len(cases)+1, line, jsonvalue.TypeName(v))
		}
		cases = append(cases, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %v", path, line+1, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	return cases, nil
}

func parseCSV(path string, data []byte) ([]map[string]any, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1 // counted here, to name the case
	header, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file (want a header row, then one case per row)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %v", path, err)
	}
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, fmt.Errorf("%s: header: column %d has no name", path, i+1)
		}
		if seen[h] {
			return nil, fmt.Errorf("%s: header: column '%s' appears twice", path, h)
		}
		seen[h] = true
		header[i] = h
	}
	var cases []map[string]any
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		line, _ := r.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("%s: case %d: %v", path, len(cases)+1, err)
		}
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%s: case %d (line %d): %d columns, want %d (%s)", path, len(cases)+1, line, len(rec), len(header), strings.Join(header, ", "))
		}
		m := make(map[string]any, len(header))
		for i, h := range header {
			m[h] = rec[i]
		}
		cases = append(cases, m)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases (only a header row)", path)
	}
	return cases, nil
}
