package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
)

// optionFlags binds flags to the fields of an options value in one place:
// each flag is declared once with the field it sets, and a flag given on
// the command line records a setter that Apply runs after the config file
// is read (flags override the file).
type optionFlags[T any] struct {
	fs *flag.FlagSet
	// def are the options without flags: -h shows each field's value
	// there as the flag's default.
	def   T
	sets  []func(*T) error
	given []string
}

// newOptionFlags returns the flags of an options value, with --set
// KEY=VALUE: a dotted YAML key of the config (train.lr=1e-4) set as the
// config file would set it, checked as strictly (setYAML).
func newOptionFlags[T any](fs *flag.FlagSet, def T) *optionFlags[T] {
	f := &optionFlags[T]{fs: fs, def: def}
	f.Func("set", "set a config key, dotted, as the YAML file would (repeatable): --set train.lr=1e-4 --set rollout.env=casino", func(o *T, v string) error {
		return setYAML(o, v)
	})
	return f
}

// setYAML decodes KEY=VALUE onto o as the one-key YAML document that sets
// it: KEY's dots nest mappings and VALUE is a YAML value (a scalar, or a
// flow list or map such as [a, b]), decoded strictly like a config file,
// so an unknown key or a wrong type is refused with the key's name.
func setYAML(o any, kv string) error {
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

// Func binds a flag whose value set parses into o.
func (f *optionFlags[T]) Func(name, usage string, set func(o *T, v string) error) {
	f.fs.Func(name, usage, func(v string) error {
		f.given = append(f.given, name)
		f.sets = append(f.sets, func(o *T) error {
			if err := set(o, v); err != nil {
				return fmt.Errorf("--%s %q: %w", name, v, err)
			}
			return nil
		})
		return nil
	})
}

// Bool binds a boolean field: --name alone sets it, --name=false clears it.
func (f *optionFlags[T]) Bool(name, usage string, field func(*T) *bool) {
	f.fs.BoolFunc(name, usage, func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		f.given = append(f.given, name)
		f.sets = append(f.sets, func(o *T) error { *field(o) = b; return nil })
		return nil
	})
	f.showDefault(name, *field(&f.def))
}

// String binds a string field.
func (f *optionFlags[T]) String(name, usage string, field func(*T) *string) {
	f.Func(name, usage, func(o *T, v string) error { *field(o) = v; return nil })
	f.showDefault(name, *field(&f.def))
}

// Int binds an int field.
func (f *optionFlags[T]) Int(name, usage string, field func(*T) *int) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.Atoi(v)
		*field(o) = n
		return numErr(err)
	})
	f.showDefault(name, *field(&f.def))
}

// Uint64 binds a uint64 field.
func (f *optionFlags[T]) Uint64(name, usage string, field func(*T) *uint64) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		*field(o) = n
		return numErr(err)
	})
	f.showDefault(name, *field(&f.def))
}

// Float32 binds a float32 field.
func (f *optionFlags[T]) Float32(name, usage string, field func(*T) *float32) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.ParseFloat(v, 32)
		*field(o) = float32(n)
		return numErr(err)
	})
	f.showDefault(name, *field(&f.def))
}

// Strings binds a comma-separated list.
func (f *optionFlags[T]) Strings(name, usage string, field func(*T) *[]string) {
	f.Func(name, usage, func(o *T, v string) error {
		*field(o) = strings.Split(v, ",")
		return nil
	})
	f.showDefault(name, strings.Join(*field(&f.def), ","))
}

// showDefault records v, the field's value without flags, as the flag's
// default for -h.
func (f *optionFlags[T]) showDefault(name string, v any) {
	f.fs.Lookup(name).DefValue = fmt.Sprint(v)
}

func numErr(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return ne.Err
	}
	return err
}

// Apply runs the setters of the given flags, in command-line order.
func (f *optionFlags[T]) Apply(o *T) error {
	for _, set := range f.sets {
		if err := set(o); err != nil {
			return fmt.Errorf("%w: %w", err, errUsage)
		}
	}
	return nil
}

// Given are the names of the flags on the command line.
func (f *optionFlags[T]) Given() []string { return f.given }

// llamaLibEnv is the one place the library directory's environment
// variable is read; --llama-lib overrides it.
func llamaLibEnv() string { return os.Getenv("OMAR_LLAMA_LIB") }

// bindBackend binds the flags of how backends are opened; be selects the
// players.Backend inside T.
func bindBackend[T any](f *optionFlags[T], be func(*T) *players.Backend) {
	f.String("llama-lib", "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)", func(o *T) *string { return &be(o).LlamaLib })
	f.Int("threads", "threads for token generation (default half the CPUs, at most 8)", func(o *T) *int { return &be(o).Threads })
	f.Int("threads-batch", "threads for prompt processing (default --threads)", func(o *T) *int { return &be(o).ThreadsBatch })
	f.Int("contexts", "llama contexts per model, each on --threads threads (a model too small to split across threads uses a core per context; default 1)", func(o *T) *int { return &be(o).Contexts })
	f.Int("gpu-layers", "layers offloaded to a GPU backend (-1 all)", func(o *T) *int { return &be(o).GPULayers })
	f.String("kv", "KV cache type: f16 (default), f32 or q8_0", func(o *T) *string { return &be(o).KVCache })
}

// bindRollout binds the flags that override a rollout's options; ro
// selects them inside T.
func bindRollout[T any](f *optionFlags[T], ro func(*T) *loop.RolloutOptions) {
	f.String("env", "environment id (overrides the config; see omar envs)", func(o *T) *string { return &ro(o).Env })
	f.String("model", "policy model GGUF file", func(o *T) *string { return &ro(o).Model })
	f.Func("agents", "seat agents, e.g. '*=policy,seat0=scripted:random'", func(o *T, v string) error {
		a, err := loop.ParseAgents(v)
		ro(o).Agents = a
		return err
	})
	f.String("llama-lib", "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)", func(o *T) *string { return &ro(o).LlamaLib })
	f.Int("episodes", "number of episodes (per iteration in selfplay)", func(o *T) *int { return &ro(o).Episodes })
	f.Int("parallel", "episodes in flight", func(o *T) *int { return &ro(o).Parallel })
	f.Uint64("seed", "run seed", func(o *T) *uint64 { return &ro(o).Seed })
	f.Float32("temperature", "sampling temperature", func(o *T) *float32 { return &ro(o).Temperature })
	f.Int("threads", "CPU threads of the llama backend", func(o *T) *int { return &ro(o).Threads })
	f.Int("contexts", "llama contexts over the model, each on --threads threads (0: 2 for a model file of at most 32 MiB on the CPU with one thread, else 1)", func(o *T) *int { return &ro(o).Contexts })
}
