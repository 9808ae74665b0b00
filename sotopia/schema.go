package sotopia

import (
	"bytes"
	"encoding/json"
)

// Backends that cannot take a GBNF grammar (Ollama) constrain replies with
// a JSON schema instead. The schemas below describe the same JSON as
// ScoreGrammar and ProcessGrammar, with properties in the grammar's order:
// llama.cpp's schema-to-grammar conversion, which Ollama uses, keeps that
// order, so the judge still writes each reasoning before its score and the
// goal last. A schema cannot express everything the grammar does (the
// grammar also forbids whitespace), so replies are still checked by the
// strict parsers and retried.

// object is a JSON object that keeps its keys in insertion order
// (encoding/json sorts map keys).
type object []field

type field struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// closedObject is the schema of an object with exactly the given
// properties, in order.
func closedObject(props object) object {
	required := make([]string, len(props))
	for i, p := range props {
		required[i] = p.key
	}
	return object{
		{"type", "object"},
		{"properties", props},
		{"required", required},
		{"additionalProperties", false},
	}
}

func stringSchema(maxChars int) object {
	return object{{"type", "string"}, {"maxLength", maxChars}}
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings, ints and bools go in: this cannot fail.
		panic(err)
	}
	return b
}

// ScoreSchema is the JSON schema of ScoreGrammar's replies.
func ScoreSchema(dims []Dimension, reasoningChars int) json.RawMessage {
	var agent object
	for _, d := range dims {
		agent = append(agent, field{d.Key, closedObject(object{
			{"reasoning", stringSchema(reasoningChars)},
			{"score", object{{"type", "integer"}, {"minimum", d.Lo}, {"maximum", d.Hi}}},
		})})
	}
	return mustMarshal(closedObject(object{
		{"agent_1", closedObject(agent)},
		{"agent_2", closedObject(agent)},
	}))
}

// ProcessSchema is the JSON schema of ProcessGrammar's replies.
func ProcessSchema(reasoningChars int) json.RawMessage {
	return processSchema(reasoningChars, true)
}

// FixedProcessSchema is the JSON schema of FixedProcessGrammar's replies.
func FixedProcessSchema(reasoningChars int) json.RawMessage {
	return processSchema(reasoningChars, false)
}

func processSchema(reasoningChars int, weights bool) json.RawMessage {
	criterion := closedObject(object{
		{"criterion", stringSchema(reasoningChars)},
		{"pass", object{{"type", "boolean"}}},
	})
	props := object{{"stage", object{{"type", "string"}, {"enum", Stages}}}}
	if weights {
		var ws object
		for _, d := range ProcessDimensions {
			ws = append(ws, field{d.Key, object{{"type", "number"}, {"minimum", 0}, {"maximum", 1}}})
		}
		props = append(props, field{"weights", closedObject(ws)})
	}
	for _, d := range ProcessDimensions {
		props = append(props, field{d.Key, object{
			{"type", "array"}, {"items", criterion}, {"minItems", 2}, {"maxItems", 4},
		}})
	}
	return mustMarshal(closedObject(props))
}
