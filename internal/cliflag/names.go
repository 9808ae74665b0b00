package cliflag

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/internal/suggest"
)

// One vocabulary of flags across commands: a setting has one name
// everywhere. Renamed flags keep their old spelling as a hidden alias for
// one release, with a note when it is used.

// aliasUsage marks an alias in its flag's usage; Print leaves those flags
// out.
const aliasUsage = "\x00alias of --"

// aliasValue sets the value of the flag it stands for, with a note.
type aliasValue struct {
	flag.Value
	program, old, name string
	note               io.Writer
}

func (a aliasValue) Set(v string) error {
	fmt.Fprintf(a.note, "%s: --%s is now --%s (the old name goes in the next release)\n", a.program, a.old, a.name)
	return a.Value.Set(v)
}

// IsBoolFlag lets a boolean flag's alias stand alone (--records).
func (a aliasValue) IsBoolFlag() bool {
	b, ok := a.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Alias registers old as a hidden spelling of fs's flag name: setting it
// sets name and writes a note to note, naming the program as the first
// word of fs's name ("omar eval": omar). It panics if name is not a flag
// of fs, a mistake of the program rather than of its user.
func Alias(fs *flag.FlagSet, old, name string, note io.Writer) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cliflag: alias of an unknown flag --" + name)
	}
	program, _, _ := strings.Cut(fs.Name(), " ")
	fs.Var(aliasValue{Value: f.Value, program: program, old: old, name: name, note: note}, old, aliasUsage+name)
}

// IsAlias reports whether f is an old spelling kept by Alias.
func IsAlias(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, aliasUsage) }

// Shown are fs's flags without the aliases, by name.
func Shown(fs *flag.FlagSet) []*flag.Flag {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !IsAlias(f) {
			flags = append(flags, f)
		}
	})
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	return flags
}

// Print writes the usage of fs's flags without the aliases, each with
// its default where it has one (Default).
func Print(w io.Writer, fs *flag.FlagSet) {
	for _, f := range Shown(fs) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		line += "\n    \t" + usage
		if d := Default(f); d != "" {
			line += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintln(w, line)
	}
}

// Default is f's default as -h shows it: "" for none (an empty string,
// false, 0, or a usage that already names its default); quoted when it
// holds a space or a comma.
func Default(f *flag.Flag) string {
	switch {
	case strings.Contains(f.Usage, "default"):
		return ""
	case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0" || f.DefValue == "[]":
		return ""
	}
	if _, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok && strings.ContainsAny(f.DefValue, " ,") {
		return fmt.Sprintf("%q", f.DefValue)
	}
	return f.DefValue
}

// Given reports whether the command line set fs's flag name.
func Given(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// IsParseError reports whether err is the flag package's parse error: an
// unknown flag, a missing or malformed value.
func IsParseError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: ", "flag needs an argument: ", "invalid value ", "invalid boolean value ", "bad flag syntax: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Suggestion returns ` (did you mean --NAME?)` for err, fs's parse error
// of an unknown flag close to one of fs's flags, else "".
func Suggestion(fs *flag.FlagSet, err error) string {
	const unknown = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, unknown) {
		return ""
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, unknown), "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := suggest.Closest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean --%s?)", best)
	}
	return ""
}

// List splits a comma-separated flag value into its trimmed, non-empty
// items.
func List(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Ints parses a comma-separated flag value of integers, each at least
// least.
func Ints(s string, least int) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, numErr(err)
		}
		if n < least {
			return nil, fmt.Errorf("%d < %d", n, least)
		}
		out = append(out, n)
	}
	return out, nil
}

// Uints parses a comma-separated flag value of non-negative integers.
func Uints(s string) ([]uint64, error) {
	var out []uint64
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(part), 10, 64)
		if err != nil {
			return nil, numErr(err)
		}
		out = append(out, n)
	}
	return out, nil
}

// JSON is a flag.Func setter decoding the flag's value as JSON into *p
// (game parameters, say); an empty value leaves *p as it is.
func JSON[T any](p *T) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		if err := json.Unmarshal([]byte(s), p); err != nil {
			return fmt.Errorf("want JSON: %v", err)
		}
		return nil
	}
}

// Float32 is a flag.Func setter of *p: a float32 flag for the flag
// package, which has none.
func Float32(p *float32) func(string) error {
	return func(s string) error {
		v, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return numErr(err)
		}
		*p = float32(v)
		return nil
	}
}
