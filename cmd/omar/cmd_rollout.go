package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp"
	sjudge "github.com/omar-selfplay/omar/loop/judge"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/sotopia"
)

func init() {
	register(command{name: "rollout", summary: "play episodes with one policy on every seat and write trajectories", run: runRollout})
}

// absPaths makes the config's file paths absolute (relative to the working
// directory), so that a saved config means the same files from anywhere.
func (c *rolloutConfig) absPaths() error {
	paths := []*string{&c.Model, &c.Adapter, &c.FrozenModel, &c.LlamaLib, &c.JudgeModel}
	if c.Judge != nil {
		paths = append(paths, &c.Judge.Model)
	}
	for _, p := range paths {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// rolloutConfig is the YAML form of a rollout (also the "rollout" section
// of a selfplay config). Zero values take the defaults of
// selfplay.Options and llama.Options.
type rolloutConfig struct {
	Env          string         `yaml:"env"`
	Params       map[string]any `yaml:"params"`
	Episodes     int            `yaml:"episodes"`
	FirstEpisode int            `yaml:"first_episode"`
	Parallel     int            `yaml:"parallel"`
	GroupSize    int            `yaml:"group_size"`
	Seed         uint64         `yaml:"seed"`

	// Model is the policy's GGUF file; empty when every seat is scripted.
	Model       string `yaml:"model"`
	Adapter     string `yaml:"adapter"`
	FrozenModel string `yaml:"frozen_model"`
	// Agents maps a seat name, "seat<N>", a role or "*" to policy, frozen,
	// scripted or scripted:NAME.
	Agents map[string]string `yaml:"agents"`

	MaxTokens      int     `yaml:"max_tokens"`
	Context        int     `yaml:"context"`
	MinReplyTokens int     `yaml:"min_reply_tokens"`
	Temperature    float32 `yaml:"temperature"`
	TopK           int     `yaml:"top_k"`
	TopP           float32 `yaml:"top_p"`
	MinP           float32 `yaml:"min_p"`
	Grammar        *bool   `yaml:"grammar"`
	BatchWindowMS  float64 `yaml:"batch_window_ms"`
	MaxRetries     *int    `yaml:"max_retries"`

	// Guard flags degenerate turns (a reward-hacking guard: the
	// estimators zero their credit); nil takes the rule-based defaults,
	// guard: {enabled: false} turns it off. Keys left out of a guard
	// section keep their defaults.
	Guard *selfplay.GuardOptions `yaml:"guard"`

	// Judge gives environments that take one (SOTOPIA) an LLM judge.
	Judge *judgeConfig `yaml:"judge,omitempty"`
	// JudgeModel, JudgeProcess and JudgeContext are the older spelling of
	// judge: {model, process, context}, still read.
	JudgeModel   string `yaml:"judge_model,omitempty"`
	JudgeProcess bool   `yaml:"judge_process,omitempty"`
	JudgeContext int    `yaml:"judge_context,omitempty"`

	Threads   int    `yaml:"threads"`
	GPULayers int    `yaml:"gpu_layers"`
	KVCache   string `yaml:"kv_cache"` // "f16" (default), "f32" or "q8_0"
	LlamaLib  string `yaml:"llama_lib"`
}

// defaultRolloutConfig fills what a config left out.
func (c *rolloutConfig) applyDefaults() {
	d := selfplay.Options{}.Defaults()
	if c.Episodes == 0 {
		c.Episodes = 16
	}
	if c.Parallel == 0 {
		c.Parallel = d.Parallel
	}
	if c.GroupSize == 0 {
		c.GroupSize = d.GroupSize
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = d.MaxTokens
	}
	if c.Context == 0 {
		c.Context = d.Context
	}
	if c.MinReplyTokens == 0 {
		c.MinReplyTokens = d.MinReplyTokens
	}
	c.MinReplyTokens = min(c.MinReplyTokens, c.MaxTokens)
	if c.Grammar == nil {
		c.Grammar = &d.Grammar
	}
	if c.MaxRetries == nil {
		c.MaxRetries = &d.Engine.MaxRetries
	}
	if c.Threads == 0 {
		// One thread: on a busy 2-core machine llama.cpp's second thread
		// spin-waits for a core and a rollout of the tiny model ran 25×
		// slower with 2 threads than with 1 (17.8 s against 0.7 s).
		c.Threads = 1
	}
	if c.KVCache == "" {
		c.KVCache = "f16"
	}
	if c.Temperature == 0 {
		c.Temperature = d.Sampling.Temperature
	}
	if c.Guard == nil {
		g := selfplay.GuardOptions{}.Defaults()
		c.Guard = &g
	}
}

// judge returns the judge the config asks for (nil for none), reading
// the older judge_model keys as judge: {model, process, context}.
func (c *rolloutConfig) judge() (*judgeConfig, error) {
	legacy := c.JudgeModel != "" || c.JudgeProcess || c.JudgeContext != 0
	if c.Judge != nil && legacy {
		return nil, errors.New("judge_model, judge_process and judge_context are the older spelling of judge: {model, process, context}; use only the judge section")
	}
	jc := c.Judge
	if jc == nil && c.JudgeModel != "" {
		jc = &judgeConfig{Model: c.JudgeModel, Process: c.JudgeProcess, Context: c.JudgeContext}
	}
	if jc == nil {
		return nil, nil
	}
	if err := jc.validate(); err != nil {
		return nil, err
	}
	out := *jc
	if out.Context == 0 {
		out.Context = 8192
	}
	return &out, nil
}

// options converts the config into runner options.
func (c *rolloutConfig) options() (selfplay.Options, error) {
	o := selfplay.Options{}.Defaults()
	o.Seed, o.Parallel, o.GroupSize = c.Seed, c.Parallel, c.GroupSize
	o.Params = engine.Params(c.Params)
	o.Engine.MaxRetries = *c.MaxRetries
	o.MaxTokens, o.Context, o.MinReplyTokens = c.MaxTokens, c.Context, c.MinReplyTokens
	o.Sampling = inference.Sampling{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP}
	o.Grammar = *c.Grammar
	o.BatchWindow = time.Duration(c.BatchWindowMS * float64(time.Millisecond))
	o.Agents = c.Agents
	if c.Guard != nil && c.Guard.Enabled {
		g, err := selfplay.NewRuleGuard(*c.Guard)
		if err != nil {
			return o, fmt.Errorf("guard: %w", err)
		}
		o.Guard = g
	}
	return o, o.Validate()
}

// guardCounts are the turn guard's counts over trajectories: turns seen,
// turns flagged and flags per reason.
type guardCounts struct {
	Turns   int            `json:"turns"`
	Flagged int            `json:"flagged"`
	Reasons map[string]int `json:"reasons,omitempty"`
}

func (g *guardCounts) add(trajs []selfplay.Trajectory) {
	for i := range trajs {
		t := &trajs[i]
		g.Turns += len(t.TurnEnds)
		for k, fl := range t.TurnFlags {
			if !t.Flagged(k) {
				continue
			}
			g.Flagged++
			if g.Reasons == nil {
				g.Reasons = map[string]int{}
			}
			for _, r := range fl {
				g.Reasons[r]++
			}
		}
	}
}

// rate is the share of flagged turns.
func (g guardCounts) rate() float64 {
	if g.Turns == 0 {
		return 0
	}
	return float64(g.Flagged) / float64(g.Turns)
}

// String lists the reasons in sorted order ("copy 1, empty 3").
func (g guardCounts) String() string {
	names := make([]string, 0, len(g.Reasons))
	for r := range g.Reasons {
		names = append(names, r)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, r := range names {
		parts[i] = fmt.Sprintf("%s %d", r, g.Reasons[r])
	}
	return strings.Join(parts, ", ")
}

// decodeYAMLFile decodes path into v strictly: an unknown key is an error
// naming its line.
func decodeYAMLFile(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// rolloutFlags binds the flags that override a rollout config.
type rolloutFlags struct {
	env, model, agents, llamaLib string
	episodes, parallel           int
	seed                         uint64
}

func (f *rolloutFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.env, "env", "", "environment id (overrides the config)")
	fs.StringVar(&f.model, "model", "", "policy model GGUF file")
	fs.StringVar(&f.agents, "agents", "", "seat agents, e.g. '*=policy,seat0=scripted:random'")
	fs.StringVar(&f.llamaLib, "llama-lib", os.Getenv("OMAR_LLAMA_LIB"), "llama.cpp library directory (default: OMAR_LLAMA_LIB or lib/llama/cpu)")
	fs.IntVar(&f.episodes, "episodes", 0, "number of episodes")
	fs.IntVar(&f.parallel, "parallel", 0, "episodes in flight")
	fs.Uint64Var(&f.seed, "seed", 0, "run seed")
}

// apply overrides c with the flags that were set.
func (f *rolloutFlags) apply(fs *flag.FlagSet, c *rolloutConfig) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "env":
			c.Env = f.env
		case "model":
			c.Model = f.model
		case "episodes":
			c.Episodes = f.episodes
		case "parallel":
			c.Parallel = f.parallel
		case "seed":
			c.Seed = f.seed
		case "llama-lib":
			c.LlamaLib = f.llamaLib
		case "agents":
			c.Agents = map[string]string{}
			for kv := range strings.SplitSeq(f.agents, ",") {
				k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
				if !ok {
					err = fmt.Errorf("--agents %q: want key=agent pairs: %w", f.agents, errUsage)
					return
				}
				c.Agents[k] = v
			}
		}
	})
	if c.LlamaLib == "" {
		c.LlamaLib = f.llamaLib
	}
	return err
}

// rolloutPlayers holds the backends of a rollout.
type rolloutPlayers struct {
	policy, frozen *selfplay.Player
	llama          *llama.Backend // the policy's backend (adapter swaps)
	closers        []io.Closer
}

func (p *rolloutPlayers) Close() {
	for _, c := range p.closers {
		c.Close()
	}
}

// openLlama opens a llama backend for path with the config's thread,
// device and cache settings.
func openLlama(c *rolloutConfig, path, adapter string, parallel, context int) (*llama.Backend, error) {
	o := llama.Options{}.Defaults()
	o.LibDir = llamacpp.DefaultLibDir(c.LlamaLib)
	o.Model = path
	o.Adapter = adapter
	o.Parallel = max(1, parallel)
	o.Context = context
	o.Batch = max(o.Batch, o.Parallel)
	o.Threads, o.ThreadsBatch = c.Threads, c.Threads
	o.GPULayers = c.GPULayers
	kv, err := parseKVType(c.KVCache)
	if err != nil {
		return nil, fmt.Errorf("kv_cache %w", err)
	}
	o.KVType = kv
	return llama.New(o)
}

// openPlayers loads the policy (and frozen) models the config names.
// seatsPerEpisode sizes the llama context's sequence slots.
func openPlayers(c *rolloutConfig, seatsPerEpisode int) (*rolloutPlayers, error) {
	p := &rolloutPlayers{}
	open := func(path, adapter string) (*llama.Backend, error) {
		b, err := openLlama(c, path, adapter, c.Parallel*seatsPerEpisode, c.Context)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, b)
		return b, nil
	}
	if c.Model != "" {
		b, err := open(c.Model, c.Adapter)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.llama = b
		p.policy = &selfplay.Player{Label: "llama:" + filepath.Base(c.Model), Backend: b, Tokenizer: b}
	}
	if c.FrozenModel != "" {
		b, err := open(c.FrozenModel, "")
		if err != nil {
			p.Close()
			return nil, err
		}
		p.frozen = &selfplay.Player{Label: "frozen:" + filepath.Base(c.FrozenModel), Backend: b, Tokenizer: b}
	}
	return p, nil
}

// attachJudge gives g the LLM judge the config names (SOTOPIA; other
// environments take none). A GGUF or Ollama judge gets a backend of its
// own. policy: true shares the policy's backend when nothing is trained
// (rollout); with trainPolicy set (selfplay) it loads the policy's model
// file again without the adapter, because a judge that is the policy being
// trained would grade its own updates.
func attachJudge(g engine.Game, c *rolloutConfig, p *rolloutPlayers, trainPolicy bool) (engine.Game, error) {
	jc, err := c.judge()
	if jc == nil || err != nil {
		return g, err
	}
	sg, ok := g.(*sotopia.Game)
	if !ok {
		return nil, fmt.Errorf("judge: %s takes no judge", g.ID())
	}
	var comp *sjudge.Completer
	o := sotopia.JudgeOptions{}.Defaults()
	switch {
	case jc.OllamaModel != "":
		var closer io.Closer
		if comp, closer, o.Label, err = openOllamaJudge(*jc, c.Parallel); err != nil {
			return nil, err
		}
		p.closers = append(p.closers, closer)
	case jc.Policy && !trainPolicy:
		if p.llama == nil {
			return nil, errors.New("judge: policy: true needs a policy model (model)")
		}
		comp, o.Label = sjudge.New(p.llama), "policy:"+filepath.Base(c.Model)
	default:
		path, label := jc.Model, "llama:"+filepath.Base(jc.Model)
		if jc.Policy {
			path, label = c.Model, "policy-base:"+filepath.Base(c.Model)
		}
		b, err := openLlama(c, path, "", c.Parallel, jc.Context)
		if err != nil {
			return nil, fmt.Errorf("judge: %w", err)
		}
		p.closers = append(p.closers, b)
		comp, o.Label = sjudge.New(b), label
	}
	o.Process, o.Extra = jc.Process, jc.Extra
	j, err := sotopia.NewJudge(comp, o)
	if err != nil {
		return nil, err
	}
	return sg.WithJudge(j), nil
}

// rolloutWriter writes trajectories and episode records as JSONL.
type rolloutWriter struct {
	trajFile, epFile *os.File
	traj             *selfplay.TrajectoryWriter
	eps              *json.Encoder
}

func newRolloutWriter(dir string) (*rolloutWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tf, err := os.Create(filepath.Join(dir, "trajectories.jsonl"))
	if err != nil {
		return nil, err
	}
	ef, err := os.Create(filepath.Join(dir, "episodes.jsonl"))
	if err != nil {
		tf.Close()
		return nil, err
	}
	return &rolloutWriter{trajFile: tf, epFile: ef, traj: selfplay.NewTrajectoryWriter(tf), eps: json.NewEncoder(ef)}, nil
}

func (w *rolloutWriter) write(res *selfplay.EpisodeResult) error {
	for i := range res.Trajectories {
		if err := w.traj.Write(&res.Trajectories[i]); err != nil {
			return err
		}
	}
	if err := w.eps.Encode(res.Record); err != nil {
		return fmt.Errorf("write episode: %w", err)
	}
	return nil
}

func (w *rolloutWriter) close() error {
	return errors.Join(w.traj.Flush(), w.trajFile.Close(), w.epFile.Close())
}

func runRollout(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "rollout")
	config := fs.String("config", "", "YAML config file (flags override it)")
	out := fs.String("out", "traj", "output directory")
	var rf rolloutFlags
	rf.bind(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v: %w", fs.Args(), errUsage)
	}
	var cfg rolloutConfig
	if *config != "" {
		// A guard section merges into the defaults.
		g := selfplay.GuardOptions{}.Defaults()
		cfg.Guard = &g
		if err := decodeYAMLFile(*config, &cfg); err != nil {
			return err
		}
	}
	if err := rf.apply(fs, &cfg); err != nil {
		return err
	}
	cfg.applyDefaults()
	if cfg.Env == "" {
		return fmt.Errorf("no environment: set env in the config or --env: %w", errUsage)
	}
	g, err := findGame(cfg.Env)
	if err != nil {
		return err
	}
	opts, err := cfg.options()
	if err != nil {
		return err
	}
	specs, err := g.Seats(opts.Params)
	if err != nil {
		return err
	}
	ps, err := openPlayers(&cfg, len(specs))
	if err != nil {
		return err
	}
	defer ps.Close()
	if g, err = attachJudge(g, &cfg, ps, false); err != nil {
		return err
	}
	runner, err := selfplay.NewRunner(g, ps.policy, ps.frozen, opts)
	if err != nil {
		return err
	}
	w, err := newRolloutWriter(*out)
	if err != nil {
		return err
	}
	var rewards = map[string][]float64{}
	var roles []string
	nTraj := 0
	var guard guardCounts
	bar := newProgress(env, cfg.Episodes, "rollout "+g.ID())
	st, runErr := runner.Run(ctx, cfg.FirstEpisode, cfg.Episodes, func(res *selfplay.EpisodeResult) error {
		bar.add(1)
		nTraj += len(res.Trajectories)
		guard.add(res.Trajectories)
		for _, s := range res.Record.Seats {
			if _, ok := rewards[s.Role]; !ok {
				roles = append(roles, s.Role)
			}
			rewards[s.Role] = append(rewards[s.Role], res.Record.Outcome.Rewards[s.Index])
		}
		return w.write(res)
	})
	bar.finish()
	if err := errors.Join(runErr, w.close()); err != nil {
		return err
	}
	report := struct {
		selfplay.Stats
		// Backend counters of the policy's llama backend: decode steps
		// and sequences sampled per step (occupancy).
		BackendSteps int64   `json:"backend_steps,omitempty"`
		Occupancy    float64 `json:"occupancy,omitempty"`
		// DegenerateRate is the share of the policy's turns the guard
		// flagged; Degenerate counts turns and flags per reason.
		DegenerateRate float64      `json:"degenerate_rate"`
		Degenerate     *guardCounts `json:"degenerate,omitempty"`
	}{Stats: st}
	if cfg.Guard.Enabled {
		report.DegenerateRate, report.Degenerate = guard.rate(), &guard
	}
	if ps.llama != nil {
		bs := ps.llama.Stats()
		report.BackendSteps = bs.Steps
		if bs.Steps > 0 {
			report.Occupancy = float64(bs.GeneratedTokens) / float64(bs.Steps)
		}
	}
	stats, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "stats.json"), append(stats, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%d episodes of %s, %d trajectories, %d generated tokens in %.1fs (%.0f tok/s, %.1f sequences per decode step)\n",
		st.Episodes, g.ID(), nTraj, st.GeneratedTokens, st.Wall.Seconds(), st.TokensPerSecond(), report.Occupancy)
	for _, r := range roles {
		fmt.Fprintf(env.stdout, "  mean reward %-12s %.3f\n", r, meanReward(rewards[r]))
	}
	if cfg.Guard.Enabled {
		fmt.Fprintf(env.stdout, "  degenerate turns %d of %d (%.1f%%) %s\n", guard.Flagged, guard.Turns, 100*guard.rate(), guard)
	}
	fmt.Fprintf(env.stdout, "wrote %s, %s and %s\n", filepath.Join(*out, "trajectories.jsonl"),
		filepath.Join(*out, "episodes.jsonl"), filepath.Join(*out, "stats.json"))
	return nil
}

func meanReward(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
