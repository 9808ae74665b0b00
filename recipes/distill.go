package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// DistillOptions are multi-teacher on-policy distillation (SocialRL-Neg):
// one student learns every environment from that environment's specialist.
// Each step draws an environment by gap-closed sampling, the student plays
// a batch of its episodes (one seat, a scripted opponent in the other),
// and every token the student sampled is trained towards the specialist's
// distribution at that position: the reverse KL on the specialist's top-k
// logprobs (train.TopKReverseKL), on exactly the sampled ids.
type DistillOptions struct {
	// Run is the template of the specialists' runs (a teacher without an
	// adapter is trained first, as an ordinary run) and of the student's
	// rollouts (model, rollout options) and trainer (train; lr is LR).
	Run      loop.Options     `yaml:"run"`
	Teachers []DistillTeacher `yaml:"teachers"`
	// Steps are distillation steps (one optimizer pass over one batch);
	// Episodes the student's episodes per step.
	Steps    int `yaml:"steps"`
	Episodes int `yaml:"episodes"`
	// TopK is the teacher's tokens per position (32).
	TopK int     `yaml:"top_k"`
	LR   float32 `yaml:"lr"`
	// Sampling is the gap-closed environment sampling.
	Sampling GapSampling `yaml:"sampling"`
	// EvalEpisodes per pairing of the held-out evaluations (base and
	// specialist before, the student after) against Opponents, which are
	// also the student's opponents in its training games.
	EvalEpisodes int      `yaml:"eval_episodes"`
	Opponents    []string `yaml:"opponents"`
}

// DistillTeacher is one environment and its specialist.
type DistillTeacher struct {
	Env    string         `yaml:"env"`
	Params map[string]any `yaml:"params"`
	// Adapter is the specialist's LoRA adapter; empty trains one in
	// DIR/teacher-ENV for Iterations iterations of the run template.
	Adapter    string `yaml:"adapter"`
	Iterations int    `yaml:"iterations"`
}

// GapSampling are the weights of the environments: with g_e the
// specialist's held-out gain over the base model and ρ_e the share of it
// the student recovered in its last Window games of e,
// w_e = λ if g_e < δ else max(0, 1 − ρ_e) + λ; the probabilities w_e / Σw
// are clamped to [Min, Max] (where that is possible: Min·n ≤ 1 ≤ Max·n).
type GapSampling struct {
	Lambda float64 `yaml:"lambda"`
	Delta  float64 `yaml:"delta"`
	Window int     `yaml:"window"`
	Min    float64 `yaml:"min"`
	Max    float64 `yaml:"max"`
}

// DefaultDistill distils the six negotiation games of the built-in model
// with the paper's sampling constants; specialists are trained for 5
// iterations each, the student for 60 steps of 16 episodes. LR is the
// built-in model's (the paper's 1e-5 is for a 4B model).
func DefaultDistill() DistillOptions {
	o := DistillOptions{Run: loop.Options{}.Defaults(), Steps: 60, Episodes: 16, TopK: 32, LR: 1e-3, EvalEpisodes: 16,
		Sampling:  GapSampling{Lambda: .05, Delta: .03, Window: 500, Min: .10, Max: .40},
		Opponents: []string{"scripted:naive", "scripted:strategic"}}
	o.Run.Eval.Every, o.Run.League.Enabled = 0, false
	for _, env := range []string{"calendar", "casino", "dealornodeal", "craigslist", "marketplace", "jobinterview"} {
		o.Teachers = append(o.Teachers, DistillTeacher{Env: env, Params: loop.BuiltinParams(), Iterations: 5})
	}
	return o
}

// Validate reports the first invalid field.
func (o DistillOptions) Validate() error {
	s := o.Sampling
	switch {
	case len(o.Teachers) == 0:
		return errors.New("distill: no teachers")
	case o.Steps < 1 || o.Steps > loop.MaxCount:
		return fmt.Errorf("distill: steps %d: want 1..%d", o.Steps, loop.MaxCount)
	case o.Episodes < 1 || o.Episodes > loop.MaxCount:
		return fmt.Errorf("distill: episodes %d: want 1..%d", o.Episodes, loop.MaxCount)
	case o.TopK < 1 || o.TopK > 1024:
		return fmt.Errorf("distill: top_k %d: want 1..1024", o.TopK)
	case !finite(float64(o.LR)) || o.LR <= 0:
		return fmt.Errorf("distill: lr %v: want > 0", o.LR)
	case !finite(s.Lambda) || s.Lambda < 0 || !finite(s.Delta) || s.Delta < 0:
		return fmt.Errorf("distill: sampling: lambda %v and delta %v must be ≥ 0", s.Lambda, s.Delta)
	case s.Window < 1:
		return fmt.Errorf("distill: sampling: window %d < 1", s.Window)
	case !(s.Min >= 0 && s.Min <= s.Max && s.Max <= 1):
		return fmt.Errorf("distill: sampling: want 0 ≤ min (%v) ≤ max (%v) ≤ 1", s.Min, s.Max)
	case o.EvalEpisodes < 1:
		return fmt.Errorf("distill: eval_episodes %d < 1", o.EvalEpisodes)
	case len(o.Opponents) == 0:
		return errors.New("distill: no opponents")
	}
	seen := map[string]bool{}
	for i, t := range o.Teachers {
		if _, err := envs.Find(t.Env); err != nil {
			return fmt.Errorf("distill: teacher %d: %w", i+1, err)
		}
		if seen[t.Env] {
			return fmt.Errorf("distill: teacher %d: a second teacher of %s", i+1, t.Env)
		}
		seen[t.Env] = true
		if t.Adapter == "" && t.Iterations < 1 {
			return fmt.Errorf("distill: teacher %d (%s): no adapter, and iterations %d < 1 to train one", i+1, t.Env, t.Iterations)
		}
	}
	if _, err := loop.ScriptedOpponents(o.Opponents); err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	return nil
}

// GapProbabilities are the environments' sampling probabilities from
// their gains g and recovered shares rho (GapSampling).
func GapProbabilities(g, rho []float64, s GapSampling) []float64 {
	n := len(g)
	w := make([]float64, n)
	for e := range w {
		w[e] = s.Lambda
		if g[e] >= s.Delta {
			w[e] += max(0, 1-rho[e])
		}
	}
	sum := 0.0
	for _, v := range w {
		sum += v
	}
	p := make([]float64, n)
	for e := range p {
		if sum > 0 {
			p[e] = w[e] / sum
		} else {
			p[e] = 1 / float64(n)
		}
	}
	if s.Min*float64(n) > 1 || s.Max*float64(n) < 1 {
		return p // the bounds cannot all hold
	}
	// Clamp: fix the probabilities above Max at Max (else those below Min
	// at Min) and share the rest of the mass among the others in
	// proportion to their weights, until none leaves the bounds.
	fixed := make([]bool, n)
	for range n + 1 {
		mass, free := 1.0, 0.0
		for e := range p {
			if fixed[e] {
				mass -= p[e]
			} else {
				free += w[e]
			}
		}
		for e := range p {
			if !fixed[e] {
				if free > 0 {
					p[e] = mass * w[e] / free
				} else {
					p[e] = mass / float64(n)
				}
			}
		}
		over, under := false, false
		for e := range p {
			over = over || !fixed[e] && p[e] > s.Max
			under = under || !fixed[e] && p[e] < s.Min
		}
		if !over && !under {
			break
		}
		for e := range p {
			switch {
			case fixed[e]:
			case over && p[e] > s.Max:
				p[e], fixed[e] = s.Max, true
			case !over && p[e] < s.Min:
				p[e], fixed[e] = s.Min, true
			}
		}
	}
	return p
}

// DistillEnvResult is one environment of the distillation's report:
// held-out mean rewards of the base model, the specialist and the
// student, and the share of the specialist's gain the student recovered,
// the gap closure (student − base) / (specialist − base) (nil when the
// specialist gained less than sampling.delta: its gain is not told from
// noise), and that closure clipped to [0, 1].
type DistillEnvResult struct {
	Env        string   `json:"env"`
	Base       float64  `json:"base"`
	Specialist float64  `json:"specialist"`
	Student    float64  `json:"student"`
	Recovered  *float64 `json:"recovered"`
	Clipped    *float64 `json:"clipped"`
}

// DistillStep is one line of distill.jsonl.
type DistillStep struct {
	Step          int                `json:"step"`
	Env           string             `json:"env"`
	Probabilities map[string]float64 `json:"probabilities"`
	Reward        float64            `json:"reward"` // the student's mean reward in the step's games
	ReverseKL     float64            `json:"reverse_kl"`
	Tokens        int                `json:"trained_tokens"`
	Seconds       float64            `json:"seconds"`
}

// Files of a distillation in its directory.
const (
	DistillFile       = "distill.jsonl"
	DistillReportFile = "distill-report.json"
	StudentAdapter    = "student.gguf"
)

// distillState is the student's checkpoint blob.
type distillState struct {
	Step   int                  `json:"step"`
	Cursor map[string]int       `json:"cursor"`
	Recent map[string][]float64 `json:"recent"`
}

// Distill runs o in dir: the specialists that have no adapter are trained
// (dir/teacher-ENV, resumable as runs), base and specialists are evaluated
// on held-out deals (dir/eval/ENV), the student is distilled
// (dir/student: a checkpoint after every step; distill.jsonl) and
// evaluated, and the report is returned (and written to
// distill-report.json). An interrupted distillation resumes where it
// stopped. stage, when not nil, sees every specialist's run before it
// trains; step sees every distillation step.
func Distill(ctx context.Context, o DistillOptions, dir string, stage func(*loop.Run), step func(DistillStep)) ([]DistillEnvResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// 1. Specialists.
	teachers := make([]string, len(o.Teachers))
	for i, t := range o.Teachers {
		if teachers[i] = t.Adapter; t.Adapter != "" {
			continue
		}
		path, err := trainSpecialist(ctx, o, t, filepath.Join(dir, "teacher-"+t.Env), stage)
		if err != nil {
			return nil, fmt.Errorf("distill: specialist of %s: %w", t.Env, err)
		}
		teachers[i] = path
	}
	d, err := openDistill(o, dir, teachers)
	if err != nil {
		return nil, err
	}
	defer d.close()
	// 2. Base and specialists on held-out deals: the gains.
	before, err := d.evaluate(ctx, false)
	if err != nil {
		return nil, err
	}
	// 3. The student.
	for d.state.Step < o.Steps {
		s, err := d.step(ctx, before)
		if err != nil {
			return nil, err
		}
		if step != nil {
			step(s)
		}
	}
	// 4. The student on the same held-out deals.
	after, err := d.evaluate(ctx, true)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(NewDistillReport(after), "", "  ")
	if err != nil {
		return nil, err
	}
	return after, os.WriteFile(filepath.Join(dir, DistillReportFile), append(b, '\n'), 0o644)
}

// trainSpecialist trains (or resumes, or finds finished) the specialist
// run of t in sdir and returns its adapter.
func trainSpecialist(ctx context.Context, o DistillOptions, t DistillTeacher, sdir string, stage func(*loop.Run)) (string, error) {
	ro := o.Run
	ro.Rollout.Env, ro.Rollout.Params, ro.Iterations = t.Env, t.Params, t.Iterations
	mode := loop.Fresh
	if _, err := os.Stat(filepath.Join(sdir, runfiles.ConfigFile)); err == nil {
		var err error
		if ro, err = loop.ReadConfig(sdir); err != nil {
			return "", err
		}
		mode = loop.Resume
	}
	run, err := loop.Open(sdir, ro, mode, nil)
	if err != nil {
		return "", err
	}
	defer run.Close()
	if stage != nil {
		stage(run)
	}
	if err := run.Train(ctx); err != nil && !errors.Is(err, loop.ErrStopped) {
		return "", err
	}
	return run.Path(runfiles.AdapterFile), nil
}

// distillation is an open distillation: one llama backend serving the
// base model, the specialists (named adapters) and the student (its
// current adapter), and the student's trainer.
type distillation struct {
	o        DistillOptions
	dir      string
	lb       *llama.Backend
	tr       *train.Trainer
	threads  *loop.TrainThreads
	games    []engine.Game
	runners  []*selfplay.Runner
	opps     []string
	state    distillState
	teachers []string // adapter names in the backend
	ctxLen   int
}

func teacherName(env string) string { return "teacher-" + env }

func openDistill(o DistillOptions, dir string, adapters []string) (_ *distillation, err error) {
	d := &distillation{o: o, dir: dir, state: distillState{Cursor: map[string]int{}, Recent: map[string][]float64{}}}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	ro := o.Run.Rollout
	if ro.Model == "" {
		path, err := filepath.Abs(filepath.Join(dir, runfiles.ModelFile))
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			if err := loop.WriteModel(path, o.Run); err != nil {
				return nil, err
			}
		}
		ro.Model = path
	}
	seats := 2
	for _, t := range o.Teachers {
		g, _ := envs.Find(t.Env)
		specs, err := g.Seats(engine.Params(t.Params))
		if err != nil {
			return nil, fmt.Errorf("distill: %s: %w", t.Env, err)
		}
		seats = max(seats, len(specs))
		d.games = append(d.games, g)
	}
	lo, err := ro.LlamaOptions(ro.Model, "", ro.Parallel*seats, ro.Context)
	if err != nil {
		return nil, err
	}
	if d.lb, err = players.OpenLlamaOptions(lo); err != nil {
		return nil, err
	}
	d.ctxLen = min(ro.Context, d.lb.ContextPerSequence(), d.lb.Model().NCtxTrain())
	for i, t := range o.Teachers {
		name := teacherName(t.Env)
		if err := d.lb.LoadAdapter(context.Background(), name, adapters[i], 1); err != nil {
			return nil, fmt.Errorf("distill: specialist of %s: %w", t.Env, err)
		}
		d.teachers = append(d.teachers, name)
	}
	to := o.Run.Train
	to.LibDir, to.LR = ro.LlamaLib, o.LR
	d.threads = loop.NewTrainThreads(&to)
	if d.tr, err = train.New(ro.Model, to); err != nil {
		return nil, err
	}
	opps, _ := loop.ScriptedOpponents(o.Opponents)
	for _, p := range opps {
		d.opps = append(d.opps, engine.ScriptedAgent(p.Scripted))
	}
	student := &selfplay.Player{Label: "student", Backend: d.lb, Tokenizer: d.lb}
	for i, t := range o.Teachers {
		r := ro
		r.Env, r.Params = t.Env, t.Params
		so, err := r.RunnerOptions(nil)
		if err != nil {
			return nil, fmt.Errorf("distill: rollout: %w", err)
		}
		so.Context = d.ctxLen
		// The student plays seat i%2 of training game i, a scripted
		// opponent the other (the opponents take turns by pairs of games).
		so.Cast = func(i int) map[int]string {
			return map[int]string{1 - i%2: d.opps[(i/2)%len(d.opps)]}
		}
		so.Seed = seeds.Derive(ro.Seed, 7, uint64(i))
		run, err := selfplay.NewRunner(d.games[i], student, nil, so)
		if err != nil {
			return nil, err
		}
		d.runners = append(d.runners, run)
	}
	ckpt := filepath.Join(dir, "student")
	if _, err := os.Stat(filepath.Join(ckpt, train.CheckpointFile)); err == nil {
		extra, err := d.tr.LoadCheckpoint(ckpt)
		if err != nil {
			return nil, fmt.Errorf("distill: resume: %w", err)
		}
		if err := json.Unmarshal(extra, &d.state); err != nil {
			return nil, fmt.Errorf("distill: resume: %w", err)
		}
		if _, err := d.lb.SetAdapter(context.Background(), filepath.Join(ckpt, train.AdapterFile), 1); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *distillation) close() {
	if d.tr != nil {
		d.tr.Close()
	}
	if d.lb != nil {
		d.lb.Close()
	}
}

// evaluate plays base and specialist (and, with student, the student)
// against the opponents on every environment's held-out deals; a
// player's episodes already in dir/eval/ENV are not played again.
func (d *distillation) evaluate(ctx context.Context, student bool) ([]DistillEnvResult, error) {
	opps, _ := loop.ScriptedOpponents(d.o.Opponents)
	ro := d.o.Run.Rollout
	model := func(adapter string) *selfplay.Player {
		return &selfplay.Player{Label: "llama", Backend: d.lb, Tokenizer: d.lb, Adapter: adapter}
	}
	var out []DistillEnvResult
	for i, t := range d.o.Teachers {
		a := ro.ArenaOptions(d.ctxLen)
		a.Envs = []arena.Env{{Name: t.Env, Params: engine.Params(t.Params), Game: d.games[i]}}
		a.Episodes = d.o.EvalEpisodes
		contestants := []arena.Player{
			{Name: "base", Version: "base", Kind: players.KindBase, Model: model(inference.AdapterBase)},
			{Name: "specialist", Version: "specialist", Kind: players.KindAdapter, Model: model(d.teachers[i])},
		}
		if student {
			contestants = append(contestants, arena.Player{Name: "student", Version: "step " + strconv.Itoa(d.state.Step), Kind: players.KindAdapter, Model: model("")})
		}
		edir := filepath.Join(d.dir, "eval", t.Env)
		if err := os.MkdirAll(edir, 0o755); err != nil {
			return nil, err
		}
		rep, err := arena.Evaluate(ctx, a, edir, contestants, opps, arena.Hooks{})
		if err != nil {
			return nil, fmt.Errorf("distill: evaluate %s: %w", t.Env, err)
		}
		if err := rep.WriteFiles(edir); err != nil {
			return nil, err
		}
		by, _ := loop.MeanRewardBy(rep.Cells, func(c arena.Cell) string { return c.Player })
		r := DistillEnvResult{Env: t.Env, Base: by["base"], Specialist: by["specialist"], Student: by["student"]}
		r.Recovered = gapClosure(r.Base, r.Specialist, r.Student, d.o.Sampling.Delta)
		r.Clipped = clip01(r.Recovered)
		out = append(out, r)
	}
	return out, nil
}

// step plays one distillation step.
func (d *distillation) step(ctx context.Context, before []DistillEnvResult) (DistillStep, error) {
	start := time.Now()
	o := d.o
	n := len(o.Teachers)
	g, rho := make([]float64, n), make([]float64, n)
	for e, t := range o.Teachers {
		g[e] = before[e].Specialist - before[e].Base
		if rs := d.state.Recent[t.Env]; len(rs) > 0 && g[e] != 0 {
			rho[e] = (mean(rs) - before[e].Base) / g[e]
		}
	}
	p := GapProbabilities(g, rho, o.Sampling)
	rng := rand.New(rand.NewPCG(o.Run.Rollout.Seed, seeds.Derive(0xd157, uint64(d.state.Step))))
	e, u := 0, rng.Float64()
	for e < n-1 && u >= p[e] {
		u -= p[e]
		e++
	}
	env := o.Teachers[e].Env
	res := DistillStep{Step: d.state.Step + 1, Env: env, Probabilities: map[string]float64{}}
	for k, t := range o.Teachers {
		res.Probabilities[t.Env] = p[k]
	}

	// The student's games.
	var trajs []selfplay.Trajectory
	var rewards []float64
	cursor := d.state.Cursor[env]
	d.threads.Begin()
	_, err := d.runners[e].Run(ctx, cursor, o.Episodes, func(r *selfplay.EpisodeResult) error {
		trajs = append(trajs, r.Trajectories...)
		rewards = append(rewards, r.Record.Outcome.Rewards[r.Index%2])
		return nil
	})
	if err != nil {
		return res, err
	}
	seqs, _ := loop.Sequences(trajs)
	if len(seqs) == 0 {
		return res, fmt.Errorf("distill: step %d (%s): the student generated nothing", res.Step, env)
	}
	// From here on the step completes even when interrupted.
	ctx = context.WithoutCancel(ctx)
	top, err := d.teacherTopK(ctx, d.teachers[e], seqs)
	if err != nil {
		return res, err
	}
	obj, err := train.NewObjective(train.TopKReverseKL{K: o.TopK, Teacher: top})
	if err != nil {
		return res, err
	}
	if _, err := d.threads.Apply(d.tr); err != nil {
		return res, err
	}
	ts, err := d.tr.StepWith(ctx, obj, seqs)
	if err != nil {
		return res, err
	}
	ckpt := filepath.Join(d.dir, "student")
	d.state.Step, d.state.Cursor[env] = res.Step, cursor+o.Episodes
	recent := append(d.state.Recent[env], rewards...)
	d.state.Recent[env] = recent[max(0, len(recent)-o.Sampling.Window):]
	extra, err := json.Marshal(d.state)
	if err != nil {
		return res, err
	}
	if err := d.tr.SaveCheckpoint(ckpt, extra); err != nil {
		return res, err
	}
	if _, err := d.lb.SetAdapter(ctx, filepath.Join(ckpt, train.AdapterFile), 1); err != nil {
		return res, err
	}
	if err := d.tr.SaveAdapter(filepath.Join(d.dir, StudentAdapter)); err != nil {
		return res, err
	}
	res.Reward, res.ReverseKL, res.Tokens = mean(rewards), ts.Term(train.TermReverseKL), ts.TrainedTokens
	res.Seconds = time.Since(start).Seconds()
	return res, appendJSONLine(filepath.Join(d.dir, DistillFile), res)
}

// teacherTopK asks the backend, with the specialist's adapter, for its
// top-k logprobs at every trained position of seqs: the prompt is the
// sequence up to the position (exactly the student's ids), one token is
// drawn greedily and dropped. Positions of one sequence go in order, so
// each request extends the cached prefix of the one before by a token.
// Workers take the sequences k, k+W, … and each holds a session of the
// backend's decode schedule (unless the rollout section turns it off), so
// which queries share a decode, and so every logprob to the bit, does not
// depend on timing.
func (d *distillation) teacherTopK(ctx context.Context, adapter string, seqs []train.Sequence) ([][]train.TopK, error) {
	out := make([][]train.TopK, len(seqs))
	errs := make([]error, len(seqs))
	key := fmt.Sprintf("distill/s%d/", d.state.Step)
	workers := min(max(1, d.o.Run.Rollout.Parallel*2), len(seqs))
	// Every session is open before any worker starts: the schedule
	// waits for the sessions it knows, so none can be overtaken.
	sessions := make([]inference.Session, workers)
	if !d.o.Run.Rollout.FreeSchedule {
		for k := range sessions {
			sessions[k] = d.lb.Session(k)
		}
	}
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx := ctx
			if s := sessions[k]; s != nil {
				defer s.Close()
				wctx = inference.WithSession(ctx, s)
			}
			for si := k; si < len(seqs); si += workers {
				if errs[si] = d.queryTeacher(wctx, adapter, key+strconv.Itoa(si), seqs[si], &out[si]); errs[si] != nil {
					errs[si] = fmt.Errorf("distill: teacher at sequence %d: %w", si, errs[si])
					return
				}
			}
		}()
	}
	wg.Wait()
	d.lb.Release(key)
	return out, errors.Join(errs...)
}

// queryTeacher fills *out with the teacher's top-k at each trained
// position of s, in order, under the cache key.
func (d *distillation) queryTeacher(ctx context.Context, adapter, key string, s train.Sequence, out *[]train.TopK) error {
	*out = make([]train.TopK, len(s.Tokens))
	for pos := 1; pos < len(s.Tokens); pos++ {
		if !s.Mask[pos] {
			continue
		}
		resp, err := d.lb.Generate(ctx, []inference.Request{{
			Key: key, Prompt: s.Tokens[:pos:pos], MaxTokens: 1, TopLogprobs: d.o.TopK, Adapter: adapter,
		}})
		if err == nil && (len(resp) != 1 || len(resp[0].TopLogprobs) != 1 || len(resp[0].TopLogprobs[0]) != d.o.TopK) {
			err = fmt.Errorf("the backend returned no top-%d logprobs", d.o.TopK)
		}
		if err != nil {
			return fmt.Errorf("position %d: %w", pos, err)
		}
		tk := &(*out)[pos]
		for _, t := range resp[0].TopLogprobs[0] {
			tk.Tokens, tk.Logprobs = append(tk.Tokens, t.Token), append(tk.Logprobs, t.Logprob)
		}
	}
	return nil
}

// DistillTable writes the distillation's report as a table: held-out
// reward of the base model, the specialist and the student per
// environment, the share of the specialist's gain recovered (the gap
// closure) and that share clipped to [0, 1]; the last row is their means
// over the environments that have one (NewDistillReport).
func DistillTable(w io.Writer, rs []DistillEnvResult) {
	if len(rs) == 0 {
		return
	}
	pct := func(c *float64, none string) string {
		if c == nil {
			return none
		}
		return fmt.Sprintf("%.0f%%", 100**c)
	}
	fmt.Fprintln(w, "| env | base | specialist | student | gain recovered | clipped |\n|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %s | %s |\n", r.Env, r.Base, r.Specialist, r.Student,
			pct(r.Recovered, "n/a (gain < δ)"), pct(r.Clipped, "n/a"))
	}
	rep := NewDistillReport(rs)
	fmt.Fprintf(w, "| **mean of %d** | | | | %s | %s |\n", rep.Closed, pct(rep.GapClosure, "n/a"), pct(rep.ClippedGapClosure, "n/a"))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
