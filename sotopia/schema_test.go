package sotopia

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkSchema validates v (decoded JSON) against the subset of JSON
// schema that ScoreSchema and ProcessSchema use.
func checkSchema(s map[string]any, v any, path string) error {
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		return fmt.Errorf("%s: %v not in %v", path, v, enum)
	}
	switch s["type"] {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", path)
		}
		props := s["properties"].(map[string]any)
		for _, r := range s["required"].([]any) {
			if _, ok := o[r.(string)]; !ok {
				return fmt.Errorf("%s: missing %s", path, r)
			}
		}
		for k, x := range o {
			p, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: unexpected %s", path, k)
				}
				continue
			}
			if err := checkSchema(p, x, path+"."+k); err != nil {
				return err
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: not an array", path)
		}
		if n := float64(len(a)); n < s["minItems"].(float64) || n > s["maxItems"].(float64) {
			return fmt.Errorf("%s: %d items", path, len(a))
		}
		for i, x := range a {
			if err := checkSchema(s["items"].(map[string]any), x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: not a string", path)
		}
		if m, ok := s["maxLength"].(float64); ok && float64(utf8.RuneCountInString(str)) > m {
			return fmt.Errorf("%s: longer than %v", path, m)
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != float64(int(f)) {
			return fmt.Errorf("%s: not an integer", path)
		}
		if f < s["minimum"].(float64) || f > s["maximum"].(float64) {
			return fmt.Errorf("%s: %v out of range", path, f)
		}
	case "number":
		f, ok := v.(float64)
		if !ok {
			return fmt.Errorf("%s: not a number", path)
		}
		if f < s["minimum"].(float64) || f > s["maximum"].(float64) {
			return fmt.Errorf("%s: %v out of range", path, f)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: not a boolean", path)
		}
	default:
		return fmt.Errorf("%s: unexpected schema type %v", path, s["type"])
	}
	return nil
}

func parseProcess(s string) error { _, err := ParseProcess(s); return err }

// uniformWeights is a proposal in the grammar's number format.
var uniformWeights = `{"goal_advancement":0.25,"strategic_positioning":0.15,"relational_attunement":0.15,"persona_consistency":0.15,"contextual_coherence":0.15,"turn_quality":0.15}`

// TestSchemasMatchParsers: what the parsers accept the schemas accept, and
// what the schemas forbid the parsers reject.
func TestSchemasMatchParsers(t *testing.T) {
	hi := scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Hi })
	lo := scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Lo })
	tests := []struct {
		name   string
		schema json.RawMessage
		reply  string
		parse  func(string) error
		valid  bool
	}{
		{"eval high", ScoreSchema(EvalDimensions, 60), hi, nil, true},
		{"eval low", ScoreSchema(EvalDimensions, 60), lo, nil, true},
		{"eval above range", ScoreSchema(EvalDimensions, 60), strings.Replace(hi, `"score":10}`, `"score":11}`, 1), nil, false},
		{"eval below range", ScoreSchema(EvalDimensions, 60), scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Lo - 1 }), nil, false},
		{"eval extra key", ScoreSchema(EvalDimensions, 60), strings.Replace(hi, `"score":10}`, `"score":10,"x":1}`, 1), nil, false},
		{"eval missing agent", ScoreSchema(EvalDimensions, 60), `{"agent_1":{}}`, nil, false},
		{"extra", ScoreSchema(ExtraDimensions, 60), scoreJSON(ExtraDimensions, func(a int, d Dimension) int { return 5 + a }), nil, true},
		{"process", ProcessSchema(60), processJSONWeights("mid", uniformWeights, func(d, i int) bool { return i == 1 }, 3), parseProcess, true},
		{"process weight above 1", ProcessSchema(60), processJSONWeights("mid", strings.Replace(uniformWeights, "0.25", "1.5", 1), func(d, i int) bool { return true }, 2), nil, false},
		{"process five criteria", ProcessSchema(60), processJSONWeights("mid", uniformWeights, func(d, i int) bool { return true }, 5), parseProcess, false},
		{"process bad stage", ProcessSchema(60), processJSONWeights("middle", uniformWeights, func(d, i int) bool { return true }, 2), parseProcess, false},
		{"fixed process", FixedProcessSchema(60), processJSON("mid", func(d, i int) bool { return i == 1 }, 3), parseProcess, true},
		{"fixed process five criteria", FixedProcessSchema(60), processJSON("mid", func(d, i int) bool { return true }, 5), parseProcess, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s map[string]any
			if err := json.Unmarshal(tt.schema, &s); err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal([]byte(tt.reply), &v); err != nil {
				t.Fatal(err)
			}
			parse := tt.parse
			if parse == nil {
				dims := EvalDimensions
				if tt.name == "extra" {
					dims = ExtraDimensions
				}
				parse = func(s string) error { _, err := ParseScores(s, dims); return err }
			}
			serr := checkSchema(s, v, "$")
			if tt.parse == nil && strings.HasPrefix(tt.name, "process") {
				// The parser leaves bad weights to SanitizeWeights.
				if (serr == nil) != tt.valid {
					t.Errorf("got schema error %v, want valid %v", serr, tt.valid)
				}
				return
			}
			perr := parse(tt.reply)
			if (serr == nil) != tt.valid || (perr == nil) != tt.valid {
				t.Errorf("got schema error %v, parser error %v; want valid %v", serr, perr, tt.valid)
			}
		})
	}
}

// TestSchemaKeyOrder: properties come in the order the grammar writes
// them (reasoning before score, goal last), which is the order Ollama's
// schema-to-grammar conversion makes the model write them.
func TestSchemaKeyOrder(t *testing.T) {
	s := string(ScoreSchema(EvalDimensions, 60))
	agent := s[strings.Index(s, `"agent_1"`):strings.Index(s, `"agent_2"`)]
	last := -1
	for _, d := range EvalDimensions {
		i := strings.Index(agent, `"`+d.Key+`":`)
		if i <= last {
			t.Fatalf("got %s at %d, after %d: want dimensions in grammar order", d.Key, i, last)
		}
		last = i
	}
	if r, sc := strings.Index(agent, `"reasoning":`), strings.Index(agent, `"score":`); r < 0 || r > sc {
		t.Errorf("got reasoning at %d, score at %d: want reasoning first", r, sc)
	}
	p := string(ProcessSchema(60))
	if strings.Index(p, `"stage"`) > strings.Index(p, `"weights"`) || strings.Index(p, `"weights"`) > strings.Index(p, `"`+ProcessDimensions[0].Key+`"`) {
		t.Errorf("got %s, want stage, then weights, then the dimensions", p)
	}
}

func TestJudgeSchemasGolden(t *testing.T) {
	for name, s := range map[string]json.RawMessage{
		"judge_eval":          ScoreSchema(EvalDimensions, 300),
		"judge_extra":         ScoreSchema(ExtraDimensions, 300),
		"judge_process":       ProcessSchema(300),
		"judge_process_fixed": FixedProcessSchema(300),
	} {
		var b bytes.Buffer
		if err := json.Indent(&b, s, "", "  "); err != nil {
			t.Fatal(err)
		}
		golden(t, name+".schema.json", b.String()+"\n")
	}
}
