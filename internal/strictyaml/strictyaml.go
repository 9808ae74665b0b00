// Package strictyaml decodes omar's YAML configs strictly: an unknown key,
// a fraction given to an integer or a second document is an error naming
// its line and key, where yaml.v3 alone would drop or truncate it without a
// word. Every config the command line reads goes through it, so a typo is
// caught the same way in a run, a recipe, an evaluation or a worker's copy
// of the learner's config.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/internal/errclip"
)

// Decode decodes one YAML document from r into v strictly: an unknown
// key is an error naming its line, a fraction where v wants an integer is
// one too (yaml.v3 would truncate `threads: 1.5` to 1 without a word), and
// a stream with a second document is refused (its keys would be silently
// ignored). Errors name keys, never Go types.
func Decode(r io.Reader, v any) error { return errclip.Clip(decode(r, v)) }

func decode(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file keeps every default
		}
		return yamlError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return yamlError(err)
	default:
		return fmt.Errorf("line %d: a second YAML document (---): a config is one document", extra.Line)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlError(err)
	}
	return wholeNumbers(&doc, reflect.TypeOf(v), "")
}

var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// wholeNumbers walks the YAML node n along the Go type t it decodes into
// and reports the first fraction given to an integer field, by line and
// key. A whole number written as a float (1e3) is one yaml.v3 decodes
// exactly, and is let through.
func wholeNumbers(n *yaml.Node, t reflect.Type, key string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n == nil || t == nil || t.Implements(yamlUnmarshaler) || reflect.PointerTo(t).Implements(yamlUnmarshaler) {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		return wholeNumbers(n.Alias, t, key)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := wholeNumbers(c, t, key); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if n.ShortTag() != "!!float" {
				return nil
			}
			if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err != nil || f != math.Trunc(f) {
				return fmt.Errorf("line %d: %s: %q is not an integer", n.Line, key, n.Value)
			}
		}
	case yaml.MappingNode:
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = yamlFields(t)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if n.Content[i].ShortTag() == "!!merge" {
				// <<: a mapping (or a list of them) merged into this one.
				v := n.Content[i+1]
				if v.Kind == yaml.AliasNode {
					v = v.Alias
				}
				ms := []*yaml.Node{v}
				if v.Kind == yaml.SequenceNode {
					ms = v.Content
				}
				for _, m := range ms {
					if err := wholeNumbers(m, t, key); err != nil {
						return err
					}
				}
				continue
			}
			var ft reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				ft = fields[k]
			case reflect.Map:
				ft = t.Elem()
			}
			if err := wholeNumbers(n.Content[i+1], ft, joinKey(key, k)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, c := range n.Content {
				if err := wholeNumbers(c, t.Elem(), fmt.Sprintf("%s[%d]", key, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// yamlFields maps a struct's YAML keys to their fields' types as yaml.v3
// names them: the tag's name, else the lower-cased field name; inline
// structs' keys are the struct's own.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				maps.Copy(out, yamlFields(ft))
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func joinKey(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// DecodeFile decodes the file at path with Decode; errors start with the
// path.
func DecodeFile(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Decode(f, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

var (
	// yaml.v3 says "field envv not found in type main.rolloutConfig".
	yamlUnknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)
	// … and "cannot unmarshal !!str `abc` into int".
	yamlInto = regexp.MustCompile(`cannot unmarshal !!(\w+) ` + "`([^`]*)`" + ` into (\S+)`)
)

// yamlError rewrites yaml.v3's messages in the config's terms.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		m = yamlUnknownField.ReplaceAllString(m, `unknown key "$1"`)
		m = yamlInto.ReplaceAllStringFunc(m, func(s string) string {
			sub := yamlInto.FindStringSubmatch(s)
			return fmt.Sprintf("%q is not %s", sub[2], kindName(sub[3]))
		})
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

// kindName names a Go type as a config reader thinks of it.
func kindName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "map"), strings.Contains(goType, "."):
		return "a section (key: value lines)"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	return "a " + goType
}
