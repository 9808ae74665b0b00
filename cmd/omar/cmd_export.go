package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/omar-selfplay/omar/export"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
)

func init() {
	register(command{name: "export", summary: "turn episode records or trajectories into Parquet or Hugging Face chat JSONL", run: runExport})
}

// exportFlags are omar export's flags.
type exportFlags struct {
	in, out, format, kind  string
	rowGroupRows, maxLegal int
}

func runExport(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "export")
	var f exportFlags
	fs.StringVar(&f.in, "in", "", "input JSONL: episodes.jsonl (episode records) or trajectories.jsonl; '-' for stdin")
	fs.StringVar(&f.out, "out", "", "output file; '-' for stdout")
	fs.StringVar(&f.format, "format", "", "parquet (episodes or trajectories) or chat (Hugging Face chat JSONL, one line per seat of each episode)")
	fs.StringVar(&f.kind, "kind", "", "input kind: episodes or trajectories (default: detected from the first line)")
	fs.IntVar(&f.rowGroupRows, "row-group-rows", export.Options{}.Defaults().RowGroupRows, "Parquet rows per row group at most")
	fs.IntVar(&f.maxLegal, "max-legal", 0, "chat: list a notification's legal replies when it has at most this many (0: the default, 8; -1: never), as the policy was trained (rollout.max_legal)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cliflag.Usagef("unexpected arguments %q", fs.Args())
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	in := env.stdin
	if f.in != "-" {
		file, err := os.Open(f.in)
		if err != nil {
			return err
		}
		defer file.Close()
		in = file
	}
	bar := progress.New(env.stderr, env.interactive, -1, "export")
	shown := 0
	opts.Progress = func(st export.Stats) {
		bar.Describe(fmt.Sprintf("export: %s", st.Kind))
		bar.Add(st.Records - shown)
		shown = st.Records
	}
	opts.Warn = func(err error) { fmt.Fprintf(env.stderr, "warning: %s: %v\n", f.in, err) }
	var st export.Stats
	write := func(w io.Writer) error {
		st, err = export.Export(ctx, in, w, opts)
		return err
	}
	if f.out == "-" {
		err = write(env.stdout)
	} else {
		err = export.WriteFile(f.out, write)
	}
	bar.Finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "omar export: %s in %s\n", st.Summary(opts.Format), f.out)
	return nil
}

// options checks the flags and turns them into export options.
func (f exportFlags) options() (export.Options, error) {
	var opts export.Options
	switch {
	case f.in == "":
		return opts, cliflag.Usagef("no input: pass --in episodes.jsonl or --in trajectories.jsonl")
	case f.out == "":
		return opts, cliflag.Usagef("no output: pass --out FILE")
	case f.format == "":
		return opts, cliflag.Usagef("no format: pass --format parquet or --format chat")
	case f.rowGroupRows < 1:
		return opts, cliflag.Usagef("--row-group-rows %d < 1", f.rowGroupRows)
	}
	var err error
	if opts.Format, err = export.ParseFormat(f.format); err != nil {
		return opts, cliflag.Usagef("--format: %v", err)
	}
	if opts.Kind, err = export.ParseKind(f.kind); err != nil {
		return opts, cliflag.Usagef("--kind: %v", err)
	}
	opts.RowGroupRows, opts.MaxLegal = f.rowGroupRows, f.maxLegal
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return opts, cliflag.Usagef("%v", err)
	}
	return opts, nil
}
