package ollamatest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Instance builds a JSON value of a schema, as a model obeying it might
// write: every enum at its last value, every number at its maximum (else
// 0), every string "ok" (cut to maxLength), every boolean true, every
// array at its minItems and every object with all its properties.
func Instance(schema json.RawMessage) (string, error) {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return "", fmt.Errorf("format is not a JSON schema: %w", err)
	}
	b, err := json.Marshal(instance(s))
	return string(b), err
}

func instance(s map[string]any) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[len(enum)-1]
	}
	switch s["type"] {
	case "object":
		o := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			ps, _ := p.(map[string]any)
			o[k] = instance(ps)
		}
		return o
	case "array":
		n, _ := s["minItems"].(float64)
		items, _ := s["items"].(map[string]any)
		a := make([]any, int(n))
		for i := range a {
			a[i] = instance(items)
		}
		return a
	case "string":
		str := "ok"
		if m, ok := s["maxLength"].(float64); ok && int(m) < len(str) {
			str = str[:int(m)]
		}
		return str
	case "integer", "number":
		if m, ok := s["maximum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return true
	}
	return nil
}

// Check reports whether text is a complete reply of format: JSON for
// "json", and for a schema a value of it as far as the subset the judge
// and players use goes (type, enum, required, properties,
// additionalProperties false, items, minItems, maxItems, maxLength,
// minimum, maximum). Leading and trailing whitespace is allowed, as the
// JSON grammar allows it.
func Check(format json.RawMessage, text string) error {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return fmt.Errorf("reply %.60q is not JSON: %w", text, err)
	}
	if string(format) == `"json"` {
		return nil
	}
	var s map[string]any
	if err := json.Unmarshal(format, &s); err != nil {
		return fmt.Errorf("format is not a JSON schema: %w", err)
	}
	return check(s, v, "$")
}

func check(s map[string]any, v any, at string) error {
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	switch s["type"] {
	case "object":
		return checkObject(s, v, at)
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %T", at, v)
		}
		if n, ok := s["minItems"].(float64); ok && len(a) < int(n) {
			return fmt.Errorf("%s: %d items, want at least %v", at, len(a), n)
		}
		if n, ok := s["maxItems"].(float64); ok && len(a) > int(n) {
			return fmt.Errorf("%s: %d items, want at most %v", at, len(a), n)
		}
		items, _ := s["items"].(map[string]any)
		for i, e := range a {
			if err := check(items, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: want a string, got %T", at, v)
		}
		if n, ok := s["maxLength"].(float64); ok && len([]rune(str)) > int(n) {
			return fmt.Errorf("%s: %d characters, want at most %v", at, len([]rune(str)), n)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || s["type"] == "integer" && f != float64(int64(f)) {
			return fmt.Errorf("%s: want an %s, got %v", at, s["type"], v)
		}
		if m, ok := s["minimum"].(float64); ok && f < m {
			return fmt.Errorf("%s: %v < minimum %v", at, f, m)
		}
		if m, ok := s["maximum"].(float64); ok && f > m {
			return fmt.Errorf("%s: %v > maximum %v", at, f, m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a boolean, got %T", at, v)
		}
	}
	return nil
}

func checkObject(s map[string]any, v any, at string) error {
	o, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want an object, got %T", at, v)
	}
	req, _ := s["required"].([]any)
	for _, k := range req {
		if _, ok := o[fmt.Sprint(k)]; !ok {
			return fmt.Errorf("%s: missing required key %q", at, k)
		}
	}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, ok := props[k].(map[string]any)
		if !ok {
			if s["additionalProperties"] == false {
				return fmt.Errorf("%s: unexpected key %q", at, k)
			}
			continue
		}
		if err := check(p, o[k], at+"."+strings.ReplaceAll(k, ".", `\.`)); err != nil {
			return err
		}
	}
	return nil
}
