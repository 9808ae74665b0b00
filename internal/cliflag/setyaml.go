package cliflag

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/internal/strictyaml"
)

// SetYAML decodes KEY=VALUE onto o as the one-key YAML document that sets
// it: KEY's dots nest mappings and VALUE is a YAML value (a scalar, or a
// flow list or map such as [a, b]), decoded strictly like a config file,
// so an unknown key or a wrong type is refused with the key's name. Other
// keys keep their values: a key nests, it does not replace its section.
func SetYAML(o any, kv string) error {
	key, val, ok := strings.Cut(kv, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, e.g. train.lr=1e-4")
	}
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t:#{}[],&*!|>'\"%@`") {
			return fmt.Errorf("key %q: want dotted YAML keys such as train.lr", key)
		}
	}
	var value yaml.Node
	if err := yaml.Unmarshal([]byte(val), &value); err != nil || len(value.Content) != 1 {
		// Not a YAML value on its own: the text itself.
		value = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: val}}}
	}
	node := value.Content[0]
	for i := len(parts) - 1; i >= 0; i-- {
		node = &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: parts[i]}, node}}
	}
	doc, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	if err := strictyaml.Decode(bytes.NewReader(doc), o); err != nil {
		// The line is the generated document's, not the user's.
		return errors.New(strings.TrimPrefix(err.Error(), "line "+strconv.Itoa(len(parts))+": "))
	}
	return nil
}
