package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// One vocabulary of flags across commands (docs/flags.md): a setting has
// one name everywhere. Renamed flags keep their old spelling as a hidden
// alias for one release, with a note on stderr when it is used.

// aliasUsage marks an alias in its flag's usage; printFlags leaves those
// flags out.
const aliasUsage = "\x00alias of --"

// aliasValue sets the value of the flag it stands for, with a note.
type aliasValue struct {
	flag.Value
	old, name string
	note      io.Writer
}

func (a aliasValue) Set(v string) error {
	fmt.Fprintf(a.note, "omar: --%s is now --%s (the old name goes in the next release)\n", a.old, a.name)
	return a.Value.Set(v)
}

// IsBoolFlag lets a boolean flag's alias stand alone (--records).
func (a aliasValue) IsBoolFlag() bool {
	b, ok := a.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// alias registers old as a hidden spelling of the flag name.
func alias(env *cliEnv, fs *flag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("omar: alias of an unknown flag --" + name)
	}
	fs.Var(aliasValue{Value: f.Value, old: old, name: name, note: env.stderr}, old, aliasUsage+name)
}

// isAlias reports whether f is an old spelling kept by alias.
func isAlias(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, aliasUsage) }

// printFlags writes the usage of fs's flags without the aliases, each
// with its default where it has one.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !isAlias(f) {
			flags = append(flags, f)
		}
	})
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		line += "\n    \t" + usage
		if d := flagDefault(f); d != "" {
			line += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintln(w, line)
	}
}

// flagDefault is f's default as -h shows it: "" for none (an empty
// string, false, 0, or a usage that already names its default).
func flagDefault(f *flag.Flag) string {
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

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
