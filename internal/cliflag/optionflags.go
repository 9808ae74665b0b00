// Package cliflag is what a command line built on the standard flag
// package needs beyond it: flags bound to the fields of an options value
// (and --set for any key of its YAML form), old spellings kept as hidden
// aliases, usage listings with defaults, and the closest flag to a
// mistyped one.
package cliflag

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// OptionFlags binds flags to the fields of an options value in one place:
// each flag is declared once with the field it sets, and a flag given on
// the command line records a setter that Apply runs after a config file
// is read (flags override the file).
type OptionFlags[T any] struct {
	fs *flag.FlagSet
	// def are the options without flags: -h shows each field's value
	// there as the flag's default.
	def   T
	sets  []func(*T) error
	given []string
}

// NewOptionFlags returns the flags of an options value on fs, with --set
// KEY=VALUE: a dotted YAML key of the config (train.lr=1e-4) set as the
// config file would set it, checked as strictly (SetYAML). def are the
// options the flags start from, whose fields -h shows as defaults.
func NewOptionFlags[T any](fs *flag.FlagSet, def T) *OptionFlags[T] {
	f := &OptionFlags[T]{fs: fs, def: def}
	f.Func("set", "set a config key, dotted, as the YAML file would (repeatable): --set train.lr=1e-4 --set rollout.env=casino", func(o *T, v string) error {
		return SetYAML(o, v)
	})
	return f
}

// Func binds a flag whose value set parses into o.
func (f *OptionFlags[T]) Func(name, usage string, set func(o *T, v string) error) {
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
func (f *OptionFlags[T]) Bool(name, usage string, field func(*T) *bool) {
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
func (f *OptionFlags[T]) String(name, usage string, field func(*T) *string) {
	f.Func(name, usage, func(o *T, v string) error { *field(o) = v; return nil })
	f.showDefault(name, *field(&f.def))
}

// Int binds an int field.
func (f *OptionFlags[T]) Int(name, usage string, field func(*T) *int) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.Atoi(v)
		*field(o) = n
		return numErr(err)
	})
	f.showDefault(name, *field(&f.def))
}

// Uint64 binds a uint64 field.
func (f *OptionFlags[T]) Uint64(name, usage string, field func(*T) *uint64) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		*field(o) = n
		return numErr(err)
	})
	f.showDefault(name, *field(&f.def))
}

// Float32 binds a float32 field.
func (f *OptionFlags[T]) Float32(name, usage string, field func(*T) *float32) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.ParseFloat(v, 32)
		*field(o) = float32(n)
		return numErr(err)
	})
	f.showDefault(name, *field(&f.def))
}

// OptionalFloat32 binds a float32 field that is nil until the flag is
// given (nil: "the same as another setting"); -h shows no default, so the
// usage should say what nil means.
func (f *OptionFlags[T]) OptionalFloat32(name, usage string, field func(*T) **float32) {
	f.Func(name, usage, func(o *T, v string) error {
		n, err := strconv.ParseFloat(v, 32)
		if err != nil {
			return numErr(err)
		}
		n32 := float32(n)
		*field(o) = &n32
		return nil
	})
}

// Strings binds a comma-separated list.
func (f *OptionFlags[T]) Strings(name, usage string, field func(*T) *[]string) {
	f.Func(name, usage, func(o *T, v string) error {
		*field(o) = strings.Split(v, ",")
		return nil
	})
	f.showDefault(name, strings.Join(*field(&f.def), ","))
}

// showDefault records v, the field's value without flags, as the flag's
// default for -h.
func (f *OptionFlags[T]) showDefault(name string, v any) {
	f.fs.Lookup(name).DefValue = fmt.Sprint(v)
}

// numErr is a number's parse error without strconv's function and input:
// the flag's name and value are already in the message.
func numErr(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return ne.Err
	}
	return err
}

// Apply runs the setters of the given flags, in command-line order. Its
// errors are usage errors (errors.Is(err, ErrUsage)).
func (f *OptionFlags[T]) Apply(o *T) error {
	for _, set := range f.sets {
		if err := set(o); err != nil {
			return fmt.Errorf("%w: %w", err, ErrUsage)
		}
	}
	return nil
}

// Given are the names of the flags on the command line, in order.
func (f *OptionFlags[T]) Given() []string { return f.given }
