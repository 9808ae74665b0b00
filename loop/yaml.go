package loop

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// DecodeYAML decodes one YAML document from r into v strictly: an unknown
// key is an error naming its line, and a stream with a second document is
// refused (its keys would be silently ignored). Errors name keys, never Go
// types.
func DecodeYAML(r io.Reader, v any) error {
	dec := yaml.NewDecoder(r)
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
		return nil
	case err != nil:
		return yamlError(err)
	default:
		return fmt.Errorf("line %d: a second YAML document (---): a config is one document", extra.Line)
	}
}

// DecodeYAMLFile decodes the file at path with DecodeYAML; errors start
// with the path.
func DecodeYAMLFile(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := DecodeYAML(f, v); err != nil {
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
