package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/model"
)

func init() {
	register(command{name: "model", summary: "create a random test model (init) or describe a GGUF file (info)", run: runModel})
}

const modelUsage = `usage: omar model init --out FILE.gguf [flags]   write a random test model
       omar model default --out FILE.gguf      write the built-in model (--rebuild: train it anew)
       omar model info [flags] FILE.gguf       describe a GGUF file
Run 'omar model init -h', 'omar model default -h' or 'omar model info -h' for their flags.`

func runModel(ctx context.Context, env *cliEnv, args []string) error {
	if isHelp(args) {
		fmt.Fprintln(env.stderr, modelUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, modelUsage)
		return usagef("want 'omar model init|default|info [flags]'")
	}
	switch args[0] {
	case "init":
		return runModelInit(env, args[1:])
	case "info":
		return runModelInfo(env, args[1:])
	case "default":
		return runModelDefault(ctx, env, args[1:])
	}
	return usagef("unknown subcommand %q, want init, default or info", args[0])
}

func runModelInit(env *cliEnv, args []string) error {
	fs := newFlags(env, "model init")
	arch := fs.String("arch", "llama", "architecture: "+strings.Join(model.Architectures, ", "))
	preset := fs.String("preset", "tiny", "size: "+strings.Join(model.Presets, ", "))
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	out := fs.String("out", "", "output GGUF file (required)")
	ctxLen := fs.Int("ctx", 0, "context length to record (0: the preset's)")
	f16 := fs.Bool("f16", false, "store weight matrices as F16 instead of F32")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return usagef("need --out and no positional arguments")
	}
	opts := model.Options{Arch: *arch, Preset: *preset, Seed: *seed, ContextLength: *ctxLen}
	if *f16 {
		opts.Type = gguf.F16
	}
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return usageError{err}
	}
	c, err := opts.Config()
	if err != nil {
		return err
	}
	if err := model.WriteFile(*out, opts); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s: %s %s, %s parameters, vocabulary %d, context %d, seed %d\n",
		*out, c.Arch, opts.Preset, model.Count(uint64(c.Params())), c.VocabSize, c.ContextLength, opts.Seed)
	return nil
}

func runModelInfo(env *cliEnv, args []string) error {
	fs := newFlags(env, "model info")
	all := fs.Bool("tensors", false, "list every tensor")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want 'omar model info [flags] FILE.gguf'")
	}
	f, err := gguf.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	in, err := model.Inspect(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	in.Write(env.stdout, fs.Arg(0), f, *all)
	return nil
}
