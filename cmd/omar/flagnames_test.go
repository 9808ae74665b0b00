package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop"
)

var updateFlags = flag.Bool("update-flags", false, "rewrite docs/flags.md from the commands' flags")

// subcommands are the commands whose flags belong to a subcommand.
var subcommands = map[string][]string{
	"bench": {"decode", "train", "learning"},
	"model": {"init", "info", "default"},
}

// renamed are the old spellings of flags, kept as hidden aliases.
var renamed = [][3]string{ // command, old, new
	{"bench decode", "ctx", "context"},
	{"eval", "ctx", "context"},
	{"eval", "records", "write-records"},
	{"generate", "ctx", "context"},
	{"generate", "temp", "temperature"},
	{"judge", "o", "out"},
	{"model init", "ctx", "context"},
}

// retired are names no command may show: the one vocabulary says context,
// temperature and out.
var retired = []string{"ctx", "temp", "o", "c", "n-ctx", "temp-out"}

// commandFlags returns every command's (and subcommand's) flag set, by
// "command sub" name, as -h leaves it.
func commandFlags(t *testing.T) map[string]*flag.FlagSet {
	t.Helper()
	out := map[string]*flag.FlagSet{}
	for name, c := range commands {
		calls := [][]string{{"-h"}}
		if subs, ok := subcommands[name]; ok {
			calls = nil
			for _, s := range subs {
				calls = append(calls, []string{s, "-h"})
			}
		}
		for _, args := range calls {
			env := &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, stdin: strings.NewReader("")}
			err := c.run(context.Background(), env, args)
			full := strings.Join(append([]string{name}, args[:len(args)-1]...), " ")
			switch {
			case env.flags != nil:
				out[full] = env.flags
			case errors.Is(err, cliflag.ErrUsage):
				t.Fatalf("omar %s -h: %v (a command with subcommands needs an entry in subcommands)", full, err)
			}
		}
	}
	return out
}

// flagsDoc renders docs/flags.md.
func flagsDoc(sets map[string]*flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("# Command-line flags\n\n")
	b.WriteString("Every command's flags, generated from the commands themselves (`go test ./cmd/omar -run TestFlagsDoc\n-update-flags` rewrites this page; the test fails when it is out of date). One vocabulary holds\nacross commands: `--context` is a sequence's or a seat's tokens, `--temperature` the sampling\ntemperature, `--out` what a command writes, `--records` an episode-records file it reads,\n`--agents` key=agent pairs (keys: a seat's name, `seatN`, a role or `*`), `--model` a GGUF\nfile, `--seed` the run's seed. Usage errors exit with 2, failures with 1; a mistyped flag is\nanswered with the closest one.\n\n")
	b.WriteString("Renamed flags (the old spelling still works for one release, with a note on stderr):\n\n| command | old | new |\n|---|---|---|\n")
	for _, r := range renamed {
		dash := "--"
		if len(r[1]) == 1 {
			dash = "-"
		}
		fmt.Fprintf(&b, "| `omar %s` | `%s%s` | `--%s` |\n", r[0], dash, r[1], r[2])
	}
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "\n## omar %s\n\n| flag | default | meaning |\n|---|---|---|\n", n)
		for _, f := range cliflag.Shown(sets[n]) {
			d := cliflag.Default(f)
			if d != "" {
				d = "`" + d + "`"
			}
			usage := strings.NewReplacer("|", `\|`, "\n", " ").Replace(f.Usage)
			fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, d, usage)
		}
	}
	return b.String()
}

// TestFlagsDoc: docs/flags.md is every command's flags as they are.
func TestFlagsDoc(t *testing.T) {
	got := flagsDoc(commandFlags(t))
	const path = "../../docs/flags.md"
	if *updateFlags {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/omar -run TestFlagsDoc -update-flags)", err)
	}
	if string(want) != got {
		t.Errorf("docs/flags.md is out of date: run go test ./cmd/omar -run TestFlagsDoc -update-flags")
	}
}

// TestFlagVocabulary: no command shows a retired spelling, every rename's
// old name still sets the new flag, and -h shows defaults.
func TestFlagVocabulary(t *testing.T) {
	sets := commandFlags(t)
	for n, fs := range sets {
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(retired, f.Name) && !cliflag.IsAlias(f) {
				t.Errorf("omar %s shows --%s: the vocabulary's name is another (docs/flags.md)", n, f.Name)
			}
		})
	}
	for _, r := range renamed {
		fs := sets[r[0]]
		if fs == nil {
			t.Errorf("omar %s: no such command", r[0])
			continue
		}
		old, cur := fs.Lookup(r[1]), fs.Lookup(r[2])
		if old == nil || cur == nil || !cliflag.IsAlias(old) {
			t.Errorf("omar %s: --%s should be a hidden alias of --%s", r[0], r[1], r[2])
		}
	}
	var b bytes.Buffer
	cliflag.Print(&b, sets["selfplay"])
	for _, want := range []string{"--iterations", fmt.Sprintf("(default %d)", loop.Options{}.Defaults().Iterations)} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("omar selfplay -h lacks %q:\n%s", want, b.String())
		}
	}
}
