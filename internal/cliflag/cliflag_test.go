package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

type train struct {
	LR     float32 `yaml:"lr"`
	Epochs int     `yaml:"epochs"`
}

type config struct {
	Env         string            `yaml:"env"`
	Iterations  int               `yaml:"iterations"`
	MaxLegal    int               `yaml:"max_legal"`
	Agents      map[string]string `yaml:"agents"`
	Train       train             `yaml:"train"`
	Temperature *float32          `yaml:"temperature"`
	Modules     []string          `yaml:"modules"`
	Records     bool              `yaml:"records"`
	Seed        uint64            `yaml:"seed"`
}

func defaults() config {
	return config{Iterations: 3, Train: train{LR: 0.1, Epochs: 2}, Modules: []string{"q", "v"}}
}

func TestSetYAML(t *testing.T) {
	tests := []struct {
		kv      string
		check   func(o *config) bool
		wantErr string
	}{
		{"train.lr=1e-4", func(o *config) bool { return o.Train.LR == float32(1e-4) }, ""},
		{"env=casino", func(o *config) bool { return o.Env == "casino" }, ""},
		{"max_legal=-1", func(o *config) bool { return o.MaxLegal == -1 }, ""},
		{"agents={seat0: scripted}", func(o *config) bool { return o.Agents["seat0"] == "scripted" }, ""},
		{"modules=[a, b]", func(o *config) bool { return slices.Equal(o.Modules, []string{"a", "b"}) }, ""},
		{"env=[unclosed", func(o *config) bool { return o.Env == "[unclosed" }, ""},
		{"iterations=7", func(o *config) bool { return o.Iterations == 7 }, ""},
		{"train.lrr=1", nil, `unknown key "lrr"`},
		{"train.lr=abc", nil, "is not a number"},
		{"nokey", nil, "want KEY=VALUE"},
		{"train..lr=1", nil, "want dotted YAML keys"},
		{"=1", nil, "want KEY=VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.kv, func(t *testing.T) {
			o := defaults()
			err := SetYAML(&o, tc.kv)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("got error %v", err)
			case tc.check != nil && !tc.check(&o):
				t.Errorf("the key was not set: %+v", o)
			}
		})
	}
	// Other keys keep their values: a set nests, it does not replace a
	// section.
	o := defaults()
	if err := SetYAML(&o, "train.lr=0.5"); err != nil || o.Train.Epochs != 2 {
		t.Errorf("train.epochs %d after setting train.lr (err %v), want 2", o.Train.Epochs, err)
	}
}

func bind(fs *flag.FlagSet) *OptionFlags[config] {
	f := NewOptionFlags(fs, defaults())
	f.String("env", "environment", func(c *config) *string { return &c.Env })
	f.Int("iterations", "iterations", func(c *config) *int { return &c.Iterations })
	f.Float32("lr", "learning rate", func(c *config) *float32 { return &c.Train.LR })
	f.OptionalFloat32("temperature", "temperature (default: the model's)", func(c *config) **float32 { return &c.Temperature })
	f.Strings("modules", "modules", func(c *config) *[]string { return &c.Modules })
	f.Bool("records", "write records", func(c *config) *bool { return &c.Records })
	f.Uint64("seed", "seed", func(c *config) *uint64 { return &c.Seed })
	return f
}

// TestOptionFlags: flags set their fields after the file's values, in
// command-line order; a bad value is a usage error naming its flag; -h
// shows the fields' defaults.
func TestOptionFlags(t *testing.T) {
	parse := func(args ...string) (config, []string, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := bind(fs)
		o := defaults()
		o.Env = "from the file"
		if err := fs.Parse(args); err != nil {
			return o, nil, err
		}
		return o, f.Given(), f.Apply(&o)
	}
	o, given, err := parse("--iterations", "7", "--set", "iterations=9", "--lr", "0.5", "--temperature", "0", "--modules", "a,b", "--records", "--seed", "4")
	if err != nil {
		t.Fatal(err)
	}
	if o.Iterations != 9 || o.Train.LR != 0.5 || o.Temperature == nil || *o.Temperature != 0 || !slices.Equal(o.Modules, []string{"a", "b"}) || !o.Records || o.Seed != 4 {
		t.Errorf("got %+v", o)
	}
	if o.Env != "from the file" || o.Train.Epochs != 2 {
		t.Errorf("fields without flags changed: %+v", o)
	}
	if want := []string{"iterations", "set", "lr", "temperature", "modules", "records", "seed"}; !slices.Equal(given, want) {
		t.Errorf("given %v, want %v", given, want)
	}
	for _, args := range [][]string{{"--iterations", "x"}, {"--temperature", "warm"}, {"--set", "nokey"}} {
		_, _, err := parse(args...)
		if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: got %v, want a usage error naming %s", args, err, args[0])
		}
	}
	if o, _, _ := parse(); o.Temperature != nil {
		t.Errorf("without --temperature it is %v, want nil", *o.Temperature)
	}
	var b bytes.Buffer
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	bind(fs)
	Print(&b, fs)
	for _, want := range []string{"--iterations value", "(default 3)", `(default "q,v")`, "--temperature"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "the model's) (default") {
		t.Errorf("a usage naming its default got a second one:\n%s", b.String())
	}
}

// TestAlias: an old spelling sets the new flag, says so, and is not shown.
func TestAlias(t *testing.T) {
	var note, usage bytes.Buffer
	fs := flag.NewFlagSet("prog sub", flag.ContinueOnError)
	n := fs.Int("context", 1, "tokens")
	Alias(fs, "ctx", "context", &note)
	if err := fs.Parse([]string{"--ctx", "7"}); err != nil || *n != 7 {
		t.Fatalf("--ctx 7: %v, context %d", err, *n)
	}
	if want := "prog: --ctx is now --context"; !strings.Contains(note.String(), want) {
		t.Errorf("note %q, want %q", note.String(), want)
	}
	Print(&usage, fs)
	if strings.Contains(usage.String(), "ctx") || !IsAlias(fs.Lookup("ctx")) || IsAlias(fs.Lookup("context")) {
		t.Errorf("the alias is shown:\n%s", usage.String())
	}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("context", 1, "tokens")
	fs.Int("threads", 1, "threads")
	if err := fs.Parse([]string{"--threads", "1"}); err != nil || !Given(fs, "threads") || Given(fs, "context") {
		t.Errorf("Given after --threads 1 (%v): threads %v, context %v", err, Given(fs, "threads"), Given(fs, "context"))
	}
}

func TestSuggestion(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("iterations", 1, "")
	fs.String("model", "", "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--iteration", "3"}, " (did you mean --iterations?)"},
		{[]string{"-modle", "x"}, " (did you mean --model?)"},
		{[]string{"--zzz"}, ""},
		{[]string{"--iterations", "many"}, ""},
	}
	for _, tc := range tests {
		err := fs.Parse(tc.args)
		if err == nil || !IsParseError(err) {
			t.Fatalf("%v: %v is not a parse error", tc.args, err)
		}
		if got := Suggestion(fs, err); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if IsParseError(errors.New("no environment")) {
		t.Error("any error is a parse error")
	}
}

func TestUsageError(t *testing.T) {
	for _, tc := range []struct {
		err       error
		text      string
		wantUsage bool
	}{
		{Usagef("bad %d", 3), "bad 3", true},
		{Usage(errors.New("bad")), "bad", true},
		{fmt.Errorf("bad: %w", ErrUsage), "bad", true},
		{fmt.Errorf("outer: %w", Usagef("inner")), "outer: inner", true},
		{errors.New("plain: usage of memory"), "plain: usage of memory", false},
		{errors.New("disk full"), "disk full", false},
	} {
		if got := Message(tc.err); got != tc.text {
			t.Errorf("Message(%q) = %q, want %q", tc.err, got, tc.text)
		}
		if got := errors.Is(tc.err, ErrUsage); got != tc.wantUsage {
			t.Errorf("errors.Is(%q, ErrUsage) = %v, want %v", tc.err, got, tc.wantUsage)
		}
	}
}

// TestReport: help exits 0 with the flags, a flag mistake and a usage
// error 2, a failure 1, each with its message.
func TestReport(t *testing.T) {
	fs := flag.NewFlagSet("prog cmd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("iterations", 1, "iterations")
	parseErr := fs.Parse([]string{"--iteration", "2"})
	for _, tc := range []struct {
		name string
		fs   *flag.FlagSet
		err  error
		code int
		want string
	}{
		{"none", fs, nil, 0, ""},
		{"help", fs, flag.ErrHelp, 0, "Usage of prog cmd:\n  --iterations int\n"},
		{"help without flags", nil, flag.ErrHelp, 0, ""},
		{"flag", fs, parseErr, 2, "prog cmd: flag provided but not defined: -iteration (did you mean --iterations?)\nRun 'prog cmd -h' for its flags.\n"},
		{"usage", fs, fmt.Errorf("no model: %w", ErrUsage), 2, "prog cmd: no model\n"},
		{"failure", fs, errors.New("disk full"), 1, "prog cmd: disk full\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if code := Report(&b, "prog cmd", tc.fs, tc.err); code != tc.code || !strings.HasPrefix(b.String(), tc.want) || tc.want == "" && b.Len() > 0 {
				t.Errorf("exit %d, wrote %q; want %d, %q", code, b.String(), tc.code, tc.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	for in, want := range map[string][]string{"a, b,,c ": {"a", "b", "c"}, "": nil, " , ": nil, "one": {"one"}} {
		if got := List(in); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInts(t *testing.T) {
	if got, err := Ints("1, 8,32", 1); err != nil || !slices.Equal(got, []int{1, 8, 32}) {
		t.Errorf("Ints: %v, %v", got, err)
	}
	for _, bad := range []string{"0", "1,,2", "x", ""} {
		if _, err := Ints(bad, 1); err == nil {
			t.Errorf("Ints(%q) parsed", bad)
		}
	}
	if got, err := Uints("0, 18446744073709551615"); err != nil || !slices.Equal(got, []uint64{0, 1<<64 - 1}) {
		t.Errorf("Uints: %v, %v", got, err)
	}
	for _, bad := range []string{"-1", "1,", "x"} {
		if _, err := Uints(bad); err == nil {
			t.Errorf("Uints(%q) parsed", bad)
		}
	}
}

func TestJSON(t *testing.T) {
	var p map[string]any
	set := JSON(&p)
	if err := set(`{"rounds":2}`); err != nil || p["rounds"] != 2.0 {
		t.Fatalf("got %v, %v; want rounds 2", p, err)
	}
	if err := set(""); err != nil || p["rounds"] != 2.0 {
		t.Errorf("an empty value: got %v, %v; want the map kept", p, err)
	}
	if err := set("{"); err == nil || !strings.Contains(err.Error(), "want JSON") {
		t.Errorf("bad JSON: got %v", err)
	}
}
