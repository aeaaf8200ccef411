package builtins

// Evaluation builtins: datasets and the built-in scorers of `skein eval`
// (docs/evals.md).
//
//	dataset(path) -> list of dicts
//	exact(key="expected", field=None, ignore_case=False) -> scorer
//	includes(key="expected", field=None, ignore_case=True) -> scorer
//	regex(pattern, field=None) -> scorer
//	json_schema(schema, field=None) -> scorer
//	llm_judge(rubric, model=None, provider=None, threshold=0.5) -> scorer
//
// A scorer is a function (case, result) returning a bool, a number in
// [0, 1] or {score, reason}; assign one to a score_NAME global of an eval
// file. field picks result[field] when the result is a dict.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/llm/schema"
	"github.com/skein-dev/skein/vm"
)

func evalSpecs() []Spec {
	const area = "Evaluations"
	return []Spec{
		{"dataset", "(path) -> list", "The cases of a JSONL or CSV file (relative to the script's directory, read under the workspace policy), one dict per line or row.", area, datasetBuiltin},
		{"exact", "(key=\"expected\", field=None, ignore_case=False) -> scorer", "Scorer: the result (or result[field]) equals case[key]; strings compared trimmed.", area, exactBuiltin},
		{"includes", "(key=\"expected\", field=None, ignore_case=True) -> scorer", "Scorer: the result's text contains case[key] (a string, or a list: the share found).", area, includesBuiltin},
		{"regex", "(pattern, field=None) -> scorer", "Scorer: the result's text matches the regular expression (RE2 syntax, searched anywhere).", area, regexBuiltin},
		{"json_schema", "(schema, field=None) -> scorer", "Scorer: the result (a value, or text holding JSON) matches the JSON Schema; the reason lists the violations.", area, jsonSchemaBuiltin},
		{"llm_judge", "(rubric, model=None, provider=None, threshold=0.5) -> scorer", "Scorer: a model grades the result against the rubric with llm_call and output_schema {score, reason}; passes from threshold.", area, llmJudgeBuiltin},
	}
}

func datasetBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	p, err := policyOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	full := path
	if dir := vm.Dir(thread); dir != "" && !filepath.IsAbs(path) {
		// relative to the calling file, which the policy's root need not be
		if full, err = filepath.Abs(filepath.Join(dir, path)); err != nil {
			return nil, fail(b.Name(), err)
		}
	}
	data, err := p.ReadFile(full)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	cases, err := eval.ParseDataset(path, data)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	out := make([]starlark.Value, len(cases))
	for i, c := range cases {
		out[i] = vm.ToStarlark(c)
	}
	return starlark.NewList(out), nil
}

// scorer makes a scorer builtin: fn(case, result) with the result
// narrowed to result[field] when field is set.
func scorer(name, field string, fn func(thread *starlark.Thread, c *starlark.Dict, result starlark.Value) (starlark.Value, error)) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var c *starlark.Dict
		var result starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "case", &c, "result", &result); err != nil {
			return nil, err
		}
		if field != "" {
			d, ok := result.(starlark.Mapping)
			if !ok {
				return nil, fmt.Errorf("%s: field '%s': the result is a %s, not a dict", name, field, result.Type())
			}
			v, found, err := d.Get(starlark.String(field))
			if err != nil || !found {
				return reasoned(starlark.False, fmt.Sprintf("the result has no '%s'", field)), nil
			}
			result = v
		}
		return fn(thread, c, result)
	})
}

// reasoned is a scorer's {score, reason}.
func reasoned(score starlark.Value, reason string) starlark.Value {
	d := starlark.NewDict(2)
	_ = d.SetKey(starlark.String("score"), score)
	_ = d.SetKey(starlark.String("reason"), starlark.String(reason))
	return d
}

// expected reads case[key]; a case without it is the script's mistake.
func expected(name string, c *starlark.Dict, key string) (starlark.Value, error) {
	v, found, err := c.Get(starlark.String(key))
	if err != nil || !found {
		return nil, fmt.Errorf("%s: the case has no key '%s' (pass key = ... to name the expected value)", name, key)
	}
	return v, nil
}

// text is a result as text: a string as it is, anything else as str().
func text(v starlark.Value) string {
	if s, ok := v.(starlark.String); ok {
		return string(s)
	}
	return v.String()
}

func exactBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	key, field, ignoreCase := "expected", "", false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "key?", &key, "field?", &field, "ignore_case?", &ignoreCase); err != nil {
		return nil, err
	}
	return scorer("exact", field, func(_ *starlark.Thread, c *starlark.Dict, result starlark.Value) (starlark.Value, error) {
		want, err := expected("exact", c, key)
		if err != nil {
			return nil, err
		}
		ws, wok := want.(starlark.String)
		gs, gok := result.(starlark.String)
		var eq bool
		if wok && gok {
			a, b := strings.TrimSpace(string(gs)), strings.TrimSpace(string(ws))
			eq = a == b || ignoreCase && strings.EqualFold(a, b)
		} else if eq, err = starlark.Equal(result, want); err != nil {
			return nil, fmt.Errorf("exact: %v", err)
		}
		if eq {
			return starlark.True, nil
		}
		return reasoned(starlark.False, fmt.Sprintf("got %s, want %s", clipValue(result), clipValue(want))), nil
	}), nil
}

// clipValue is a value in a reason: its Starlark repr, at most 120
// characters.
func clipValue(v starlark.Value) string {
	s := v.String()
	if r := []rune(s); len(r) > 120 {
		s = string(r[:117]) + "..."
	}
	return s
}

func includesBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	key, field, ignoreCase := "expected", "", true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "key?", &key, "field?", &field, "ignore_case?", &ignoreCase); err != nil {
		return nil, err
	}
	return scorer("includes", field, func(_ *starlark.Thread, c *starlark.Dict, result starlark.Value) (starlark.Value, error) {
		want, err := expected("includes", c, key)
		if err != nil {
			return nil, err
		}
		var parts []string
		if s, ok := want.(starlark.String); ok {
			parts = []string{string(s)}
		} else if parts, err = stringsOf(want); err != nil {
			return nil, fmt.Errorf("includes: case['%s'] must be a string or a list of strings: %v", key, err)
		}
		got := text(result)
		if ignoreCase {
			got = strings.ToLower(got)
		}
		var missing []string
		for _, p := range parts {
			q := p
			if ignoreCase {
				q = strings.ToLower(p)
			}
			if !strings.Contains(got, q) {
				missing = append(missing, fmt.Sprintf("%q", p))
			}
		}
		if len(missing) == 0 {
			return starlark.True, nil
		}
		score := starlark.Float(float64(len(parts)-len(missing)) / float64(len(parts)))
		return reasoned(score, "missing "+strings.Join(missing, ", ")), nil
	}), nil
}

func regexBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pattern, field string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "field?", &field); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid pattern: %v", b.Name(), err)
	}
	return scorer("regex", field, func(_ *starlark.Thread, _ *starlark.Dict, result starlark.Value) (starlark.Value, error) {
		if re.MatchString(text(result)) {
			return starlark.True, nil
		}
		return reasoned(starlark.False, fmt.Sprintf("%s does not match /%s/", clipValue(result), pattern)), nil
	}), nil
}

func jsonSchemaBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var doc *starlark.Dict
	var field string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "schema", &doc, "field?", &field); err != nil {
		return nil, err
	}
	x, err := vm.FromStarlark(doc, "schema")
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	sch, err := schema.Compile(x)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return scorer("json_schema", field, func(_ *starlark.Thread, _ *starlark.Dict, result starlark.Value) (starlark.Value, error) {
		var v any
		if s, ok := result.(starlark.String); ok {
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return reasoned(starlark.False, "the result is not JSON: "+err.Error()), nil
			}
		} else if v, err = vm.FromStarlark(result, "result"); err != nil {
			return reasoned(starlark.False, err.Error()), nil
		}
		if err := sch.Validate("result", v); err != nil {
			return reasoned(starlark.False, err.Error()), nil
		}
		return starlark.True, nil
	}), nil
}

// judgeSchema is the output_schema of llm_judge's call (built when
// called, not at every start).
func judgeSchema() map[string]any {
	return map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"score", "reason"},
		"properties": map[string]any{
			"score":  map[string]any{"type": "number", "minimum": 0, "maximum": 1},
			"reason": map[string]any{"type": "string"},
		},
	}
}

// judgeSystem is llm_judge's system prompt.
const judgeSystem = "You grade the output of an AI system against a rubric. Reply with a JSON object: score, a number from 0 (fails the rubric entirely) to 1 (meets it fully), and reason, one or two sentences saying why."

func llmJudgeBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rubric, model, provider string
	threshold := eval.PassMark
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rubric", &rubric, "model?", &model, "provider?", &provider, "threshold?", &threshold); err != nil {
		return nil, err
	}
	if strings.TrimSpace(rubric) == "" {
		return nil, fmt.Errorf("%s: rubric is empty", b.Name())
	}
	if threshold < 0 || threshold > 1 {
		return nil, fmt.Errorf("%s: threshold must be in [0, 1], got %g", b.Name(), threshold)
	}
	return scorer("llm_judge", "", func(thread *starlark.Thread, c *starlark.Dict, result starlark.Value) (starlark.Value, error) {
		prompt := fmt.Sprintf("Rubric:\n%s\n\nInput (the case):\n%s\n\nOutput to grade:\n%s", rubric, c.String(), text(result))
		kw := []starlark.Tuple{{starlark.String("output_schema"), vm.ToStarlark(judgeSchema())}, {starlark.String("stream"), starlark.False}}
		if model != "" {
			kw = append(kw, starlark.Tuple{starlark.String("model"), starlark.String(model)})
		}
		if provider != "" {
			kw = append(kw, starlark.Tuple{starlark.String("provider"), starlark.String(provider)})
		}
		r, err := starlark.Call(thread, starlark.NewBuiltin("llm_judge", llmCall), starlark.Tuple{starlark.String(prompt), starlark.String(judgeSystem)}, kw)
		if err != nil {
			return nil, err
		}
		out, _, _ := r.(*starlark.Dict).Get(starlark.String("output"))
		verdict := out.(*starlark.Dict)
		score, _, _ := verdict.Get(starlark.String("score"))
		reason, _, _ := verdict.Get(starlark.String("reason"))
		f, _ := starlark.AsFloat(score)
		d := starlark.NewDict(3)
		_ = d.SetKey(starlark.String("score"), starlark.Float(f))
		_ = d.SetKey(starlark.String("reason"), reason)
		_ = d.SetKey(starlark.String("pass"), starlark.Bool(f >= threshold))
		return d, nil
	}), nil
}
