package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/model"
)

func init() {
	register(command{name: "model", summary: "create a random test model (init) or describe a GGUF file (info)", run: runModel})
}

const modelUsage = `usage: omar model init --out FILE.gguf [flags]   write a random test model
       omar model init --shape NAME --tokenizer DIR --out FILE.gguf   a random stand-in of a real model
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
		return cliflag.Usagef("want 'omar model init|default|info [flags]'")
	}
	switch args[0] {
	case "init":
		return runModelInit(env, args[1:])
	case "info":
		return runModelInfo(env, args[1:])
	case "default":
		return runModelDefault(ctx, env, args[1:])
	}
	return cliflag.Usagef("unknown subcommand %q, want init, default or info", args[0])
}

func runModelInit(env *cliEnv, args []string) error {
	fs := newFlags(env, "model init")
	arch := fs.String("arch", "llama", "architecture: "+strings.Join(model.Architectures, ", ")+" (not with --shape)")
	preset := fs.String("preset", "tiny", "size: "+strings.Join(model.Presets, ", ")+" (not with --shape)")
	shape := fs.String("shape", "", "a real model's exact shape (needs --tokenizer): "+strings.Join(model.ShapeNames(), ", "))
	tokDir := fs.String("tokenizer", "", "directory with a Hugging Face tokenizer.json and tokenizer_config.json to import (byte-level BPE: Qwen2/Qwen3, Llama 3)")
	layers := fs.Int("layers", 0, "keep only this many layers of the shape or preset (0: all)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	out := fs.String("out", "", "output GGUF file (required)")
	ctxLen := fs.Int("context", 0, "context length to record (0: the shape's or preset's)")
	typ := fs.String("type", "f32", "storage type of the weight matrices: f32, f16 or q8_0")
	f16 := fs.Bool("f16", false, "store weight matrices as F16 (same as --type f16)")
	cliflag.Alias(fs, "ctx", "context", env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return cliflag.Usagef("need --out and no positional arguments")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	opts := model.Options{Shape: *shape, Layers: *layers, Seed: *seed, ContextLength: *ctxLen}
	if *shape != "" {
		if set["arch"] || set["preset"] {
			return cliflag.Usagef("--shape sets the architecture and size: give no --arch or --preset with it")
		}
	} else {
		opts.Arch, opts.Preset = *arch, *preset
	}
	if *f16 {
		if set["type"] && !strings.EqualFold(*typ, "f16") {
			return cliflag.Usagef("--f16 and --type %s: give one", *typ)
		}
		*typ = "f16"
	}
	var err error
	if opts.Type, err = model.ParseType(*typ); err != nil {
		return cliflag.Usagef("--type %q: want f32, f16 or q8_0", *typ)
	}
	if *shape != "" {
		// An unknown or unsupported shape is reported before the tokenizer
		// is read (a large file, perhaps of a refused model too).
		if _, err := model.FindShape(*shape); err != nil {
			return cliflag.Usage(err)
		}
	}
	if *tokDir != "" {
		tok, err := model.ReadHFTokenizer(*tokDir)
		if err != nil {
			return err
		}
		opts.Tokenizer = tok
	}
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return cliflag.Usage(err)
	}
	c, err := opts.Config()
	if err != nil {
		return cliflag.Usage(err)
	}
	if err := model.WriteFile(*out, opts); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s: %s\n", *out, opts.Summary(c, *tokDir))
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
		return cliflag.Usagef("want 'omar model info [flags] FILE.gguf'")
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
