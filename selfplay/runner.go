package selfplay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
)

// Agent kinds of a seat.
const (
	AgentPolicy = "policy" // the trained policy; its trajectories are kept
	AgentFrozen = "frozen" // the frozen model (second backend); played only
	// AgentScripted is "scripted" (the game's default policy) or
	// "scripted:NAME".
	AgentScripted = "scripted"
)

// Options configure a Runner.
type Options struct {
	// Seed is the run's seed: episode i deals its scenario from
	// seeds.Derive(Seed, 0, i/GroupSize) and samples with seeds derived from
	// (Seed, 1, i, seat, turn).
	Seed uint64
	// Parallel is the number of episodes in flight.
	Parallel int
	// GroupSize is how many consecutive episodes share a scenario (GRPO
	// groups; 1 = every episode is dealt afresh).
	GroupSize int
	// Params are the game's parameters.
	Params engine.Params
	// Engine are the runtime options (retries, timeout).
	Engine engine.Options
	// Reply is how model seats reply (max tokens, context, sampling,
	// grammar, legal-replies line, trace): the settings a policy must be
	// evaluated and served with too.
	Reply
	Stop []string
	// BatchWindow is how long the batching aggregator waits for more
	// requests before it calls the backend with what it has; it calls at
	// once when every episode in flight is waiting. 0 (the default) calls
	// the backend directly from each seat: the llama backend merges
	// concurrent callers into its decode loop itself, and holding requests
	// back only slowed its rollouts (docs/performance.md, Rollout). The
	// aggregator is for backends that do not merge.
	BatchWindow time.Duration
	// FreeSchedule lets a backend that keeps a deterministic schedule
	// (inference.Scheduler) decode requests as they arrive instead: runs
	// are then reproducible only with Parallel 1 (runLanes). The schedule
	// is on by default; it is off anyway with BatchWindow or when the
	// players use more than one backend.
	FreeSchedule bool
	// Agents chooses each seat's agent: keys are a seat name, "seat<N>"
	// (0-based index), a role, or "*"; looked up in that order. Values are
	// "policy", "frozen", "scripted", "scripted:NAME" or the name of one of
	// Players. Unmatched seats play the policy.
	Agents map[string]string
	// Players are further players by name, for agents that are neither the
	// policy nor the frozen model (an evaluation's adapters, other models,
	// an Ollama model). Their seats are played only: trajectories are kept
	// for the policy's seats alone. A player without a Tokenizer is played
	// at the message level (Request.Messages instead of Prompt).
	Players map[string]*Player
	// KeyPrefix starts the keys of this runner's sequences in the
	// backends' caches: runners that share a backend and play the same
	// episode indices (an evaluation's pairings) keep their sequences
	// apart with distinct prefixes.
	KeyPrefix string
	// Guard flags degenerate turns of the kept trajectories after each
	// episode (Trajectory.TurnFlags); nil runs none.
	Guard TurnGuard
	// InferReward, with the theory-of-mind trace, adds InferReward × the
	// seat's INFER accuracy (InferAccuracy, the mean over its turns) to a
	// policy seat's terminal reward where the scenario knows the
	// counterpart's preferences (engine.PreferenceScenario); 0 is off.
	InferReward float64
	// Cast, when set, chooses the agents of episode i's seats instead of
	// Agents (a league: which seats the policy plays and who sits in the
	// others): seat index → agent, as Agents' values; seats it leaves out
	// fall back to Agents. It must be a function of i alone (replays and
	// resumed runs draw the same casts).
	Cast func(i int) map[int]string
}

// Defaults returns the runner defaults.
func (Options) Defaults() Options {
	return Options{
		Seed: 1, Parallel: 8, GroupSize: 1, Engine: engine.DefaultOptions(), Reply: DefaultReply(),
	}
}

// Validate checks o.
func (o Options) Validate() error {
	switch {
	case o.Parallel < 1 || o.Parallel > maxParallel:
		return fmt.Errorf("selfplay: parallel %d: want 1..%d", o.Parallel, maxParallel)
	case o.GroupSize < 1 || o.GroupSize > maxParallel:
		return fmt.Errorf("selfplay: group size %d: want 1..%d", o.GroupSize, maxParallel)
	case o.BatchWindow < 0:
		return fmt.Errorf("selfplay: batch window %v < 0", o.BatchWindow)
	}
	for name, p := range o.Players {
		switch {
		case reservedAgent(name):
			return fmt.Errorf("selfplay: player name %q is reserved (policy, frozen, scripted, scripted:NAME)", name)
		case p == nil || p.Backend == nil:
			return fmt.Errorf("selfplay: player %q has no backend", name)
		}
	}
	if err := o.Reply.Validate(); err != nil {
		return fmt.Errorf("selfplay: %w", err)
	}
	if !(o.InferReward >= 0 && o.InferReward <= 1e6) || o.InferReward > 0 && o.Trace != TraceToM {
		return fmt.Errorf("selfplay: infer reward %v: want a number ≥ 0, and not 0 only with trace %q", o.InferReward, TraceToM)
	}
	for k, v := range o.Agents {
		if !reservedAgent(v) && o.Players[v] == nil {
			return fmt.Errorf("selfplay: agent %q for %q: want policy, frozen, scripted, scripted:NAME or a player's name", v, k)
		}
	}
	return o.Engine.Validate()
}

// maxParallel bounds Parallel and GroupSize, which size goroutines and
// sequence slots (docs/security.md).
const maxParallel = 1 << 16

// reservedAgent reports whether v is one of the built-in agent kinds.
func reservedAgent(v string) bool {
	return v == AgentPolicy || v == AgentFrozen || engine.IsScripted(v)
}

// agentFor returns the agent kind of a seat.
func (o Options) agentFor(s engine.Seat) string {
	if v, ok := engine.AgentFor(o.Agents, s); ok {
		return v
	}
	return AgentPolicy
}

// EpisodeResult is one finished episode.
type EpisodeResult struct {
	Index        int
	Record       *engine.Record
	Trajectories []Trajectory
	Wall         time.Duration
	// ToM are the theory-of-mind trace scores of the episode's model
	// seats by seat index, played-only ones included (an evaluated
	// player); nil without the trace.
	ToM map[int]ToMScores
}

// Runner plays episodes of one game with one policy on every policy seat.
type Runner struct {
	game   engine.Game
	policy *Player
	frozen *Player
	opts   Options
	stats  stats
	// key distinguishes the sequences of different Run calls in the
	// backend's cache (a new policy version must not reuse old KV).
	calls atomic.Int64
	// players are Options.Players and those AddPlayer added.
	players map[string]*Player
}

// NewRunner returns a runner. frozen may be nil when no seat is "frozen";
// policy may be nil when every seat is scripted.
func NewRunner(g engine.Game, policy, frozen *Player, opts Options) (*Runner, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	specs, err := g.Seats(opts.Params)
	if err != nil {
		return nil, err
	}
	for i, s := range specs {
		kind := opts.agentFor(engine.Seat{Index: i, Name: s.Name, Role: s.Role})
		if opts.Players[kind] != nil {
			continue
		}
		switch {
		case kind == AgentPolicy && (policy == nil || policy.Backend == nil || policy.Tokenizer == nil):
			return nil, fmt.Errorf("selfplay: seat %s plays the policy, but no token-level policy backend was given", s.Name)
		case kind == AgentFrozen && (frozen == nil || frozen.Backend == nil || frozen.Tokenizer == nil):
			return nil, fmt.Errorf("selfplay: seat %s plays the frozen model, but none was given", s.Name)
		case strings.HasPrefix(kind, AgentScripted):
			if _, err := engine.ScriptedCast(g, []string{kind}, 0); err != nil {
				return nil, err
			}
		}
	}
	players := make(map[string]*Player, len(opts.Players))
	for name, p := range opts.Players {
		players[name] = p
	}
	return &Runner{game: g, policy: policy, frozen: frozen, opts: opts, players: players}, nil
}

// AddPlayer adds a named player between runs (a league's new snapshot);
// Cast may name it from the next Run on.
func (r *Runner) AddPlayer(name string, p *Player) error {
	switch {
	case reservedAgent(name):
		return fmt.Errorf("selfplay: player name %q is reserved", name)
	case p == nil || p.Backend == nil:
		return fmt.Errorf("selfplay: player %q has no backend", name)
	}
	r.players[name] = p
	return nil
}

// Stats are the counters of a Run.
type Stats struct {
	Episodes        int   `json:"episodes"`
	Turns           int64 `json:"turns"`
	PromptTokens    int64 `json:"prompt_tokens"`    // tokens appended to streams (rendered events)
	GeneratedTokens int64 `json:"generated_tokens"` // sampled tokens
	ReusedTokens    int64 `json:"reused_tokens"`    // prompt tokens served from the backend's cache
	Calls           int64 `json:"calls"`            // Generate calls
	Requests        int64 `json:"requests"`         // requests over all calls
	Segments        int64 `json:"segments"`         // streams restarted
	Breaks          int64 `json:"breaks"`           // restarts because the template rewrote earlier text
	// UnmatchedTurnRewards counts seats whose environment gave per-turn
	// rewards that could not be aligned with their model turns.
	UnmatchedTurnRewards int64         `json:"unmatched_turn_rewards"`
	Wall                 time.Duration `json:"wall_ns"`
}

// MeanBatch is the mean number of requests per Generate call.
func (s Stats) MeanBatch() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Requests) / float64(s.Calls)
}

// TokensPerSecond is generated tokens per second of wall time.
func (s Stats) TokensPerSecond() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.GeneratedTokens) / s.Wall.Seconds()
}

type stats struct {
	turns, prompt, generated, reused, calls, requests, segments, breaks, unmatched atomic.Int64
}

// addTurn counts a turn. The counters of a nil *stats (a seat stream
// outside a Runner) count nothing.
func (s *stats) addTurn(prompt, gen, reused int) {
	if s == nil {
		return
	}
	s.turns.Add(1)
	s.prompt.Add(int64(prompt))
	s.generated.Add(int64(gen))
	s.reused.Add(int64(reused))
}

func (s *stats) addSegment() {
	if s != nil {
		s.segments.Add(1)
	}
}

func (s *stats) addBreak() {
	if s != nil {
		s.breaks.Add(1)
	}
}

func (s *stats) snapshot() Stats {
	return Stats{
		Turns: s.turns.Load(), PromptTokens: s.prompt.Load(), GeneratedTokens: s.generated.Load(),
		ReusedTokens: s.reused.Load(), Calls: s.calls.Load(), Requests: s.requests.Load(),
		Segments: s.segments.Load(), Breaks: s.breaks.Load(), UnmatchedTurnRewards: s.unmatched.Load(),
	}
}

// episodeRun is the state one episode shares with its seats.
type episodeRun struct {
	opts         *Options
	stats        *stats
	key          string
	env          string
	index        int
	seed         uint64
	scenario     string
	samplingSeed uint64
	gen          generator
	// moves holds a simultaneous move's requests until all its seats
	// have theirs.
	moves *moves
}

// generator is how seats reach their backend: directly or through a
// batcher (prepare announces a request while its prompt is rendered).
type generator struct {
	prepare, unprepare func(p *Player)
	generate           func(ctx context.Context, episode int, p *Player, req inference.Request) (inference.Response, error)
	// intercepts reports whether p's requests must go through generate
	// (the aggregator; a replay) rather than straight to p's backend.
	intercepts func(p *Player) bool
	// count adds backend calls and requests made around generate.
	count func(calls, requests int)
}

// Run plays episodes first … first+n−1 with Parallel in flight and calls
// yield with each result in episode order (so output files are
// deterministic whatever order episodes finish in). It stops at the first
// error, including yield's.
func (r *Runner) Run(ctx context.Context, first, n int, yield func(*EpisodeResult) error) (Stats, error) {
	return r.RunEach(ctx, first, n, nil, yield)
}

// RunEach is Run with finished, when not nil, called as each episode
// ends, from the goroutine that played it: in the order episodes end,
// before yield receives them in episode order, so that a consumer can
// start work on an episode early (the self-play loop scores it beside the
// rollout). finished must return at once — the goroutine holds its place
// in the decode schedule meanwhile — and must not modify the result,
// which yield receives next.
func (r *Runner) RunEach(ctx context.Context, first, n int, finished func(*EpisodeResult), yield func(*EpisodeResult) error) (Stats, error) {
	start := time.Now()
	r.stats = stats{}
	key := r.opts.KeyPrefix + "r" + strconv.FormatInt(r.calls.Add(1), 10)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// running is the number of episodes in flight or about to start:
	// the batcher waits for that many before it calls the backend.
	var running atomic.Int64
	running.Store(int64(min(r.opts.Parallel, n)))
	var bat map[*Player]*batcher
	if r.opts.BatchWindow > 0 {
		bat = map[*Player]*batcher{}
		for _, p := range append([]*Player{r.policy, r.frozen}, r.named()...) {
			if p != nil && p.Backend != nil && bat[p] == nil {
				bat[p] = newBatcher(p.Backend, r.opts.BatchWindow, &running, &r.stats)
				defer bat[p].close()
			}
		}
	}
	count := func(calls, requests int) {
		r.stats.calls.Add(int64(calls))
		r.stats.requests.Add(int64(requests))
	}
	gen := generator{
		prepare: func(p *Player) {
			if b := bat[p]; b != nil {
				b.prepare()
			}
		},
		unprepare: func(p *Player) {
			if b := bat[p]; b != nil {
				b.unprepare()
			}
		},
		intercepts: func(p *Player) bool { return bat[p] != nil },
		count:      count,
		generate: func(ctx context.Context, episode int, p *Player, req inference.Request) (inference.Response, error) {
			if b := bat[p]; b != nil {
				return b.generate(ctx, episode, req)
			}
			count(1, 1)
			resps, err := p.Backend.Generate(ctx, []inference.Request{req})
			if err != nil {
				return inference.Response{}, err
			}
			if len(resps) != 1 {
				return inference.Response{}, fmt.Errorf("selfplay: backend returned %d responses for 1 request", len(resps))
			}
			return resps[0], nil
		},
	}
	var done int
	var err error
	if sched := r.scheduler(); sched != nil {
		done, err = r.runLanes(ctx, sched, first, n, key, gen, finished, yield)
	} else {
		// A finished episode keeps its slot until yield has returned for
		// it (engine.RunOrdered: memory stays bounded under a slow
		// consumer), so the batcher's count of episodes in flight or about
		// to start leaves out those waiting for their turn to be yielded.
		var ended, yielded atomic.Int64
		onEnd := finished
		recount := func() {
			f := ended.Load()
			held := f - yielded.Load()
			running.Store(max(0, min(int64(r.opts.Parallel)-held, int64(n)-f)))
			for _, b := range bat {
				b.poke()
			}
		}
		done, err = engine.RunOrdered(ctx, first, n, r.opts.Parallel,
			func(ctx context.Context, i int) (*EpisodeResult, error) {
				res, err := r.play(ctx, i, key, gen)
				if err == nil && onEnd != nil {
					onEnd(res)
				}
				ended.Add(1)
				recount()
				return res, err
			},
			func(res *EpisodeResult) error {
				err := yield(res)
				yielded.Add(1)
				recount()
				return err
			})
	}
	st := r.stats.snapshot()
	st.Episodes = done
	st.Wall = time.Since(start)
	return st, err
}

// named returns the named players in name order (a deterministic order
// for the batchers).
func (r *Runner) named() []*Player {
	names := make([]string, 0, len(r.players))
	for n := range r.players {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*Player, len(names))
	for i, n := range names {
		out[i] = r.players[n]
	}
	return out
}

// EpisodeSeed is the seed the scenario of episode i is dealt from.
func (r *Runner) EpisodeSeed(i int) uint64 {
	return seeds.Derive(r.opts.Seed, 0, uint64(i/r.opts.GroupSize))
}

func (r *Runner) play(ctx context.Context, i int, key string, gen generator) (*EpisodeResult, error) {
	start := time.Now()
	defer r.release(key, i)
	seed := r.EpisodeSeed(i)
	run := &episodeRun{
		opts: &r.opts, stats: &r.stats, key: key, env: r.game.ID(), index: i, seed: seed,
		scenario:     r.game.ID() + "#" + strconv.Itoa(i/r.opts.GroupSize),
		samplingSeed: SamplingSeed(r.opts.Seed, i),
		gen:          gen,
	}
	run.moves = &moves{gen: gen, episode: i}
	var seats []*modelSeat
	var drawn map[int]string
	if r.opts.Cast != nil {
		drawn = r.opts.Cast(i)
	}
	cast := func(s engine.Seat) (engine.Agent, string, error) {
		kind, ok := drawn[s.Index]
		if !ok {
			kind = r.opts.agentFor(s)
		}
		if p := r.players[kind]; p != nil {
			ms := newModelSeat(run, p, s, false)
			seats = append(seats, ms)
			return ms, p.Label, nil
		}
		switch {
		case kind == AgentPolicy || kind == AgentFrozen:
			p, keep := r.policy, true
			if kind == AgentFrozen {
				p, keep = r.frozen, false
			}
			ms := newModelSeat(run, p, s, keep)
			seats = append(seats, ms)
			return ms, p.Label, nil
		default:
			c, err := engine.ScriptedCast(r.game, []string{kind}, seeds.Derive(r.opts.Seed, 2, uint64(i)))
			if err != nil {
				return nil, "", err
			}
			return c(s)
		}
	}
	rec, err := engine.Play(ctx, r.game, seed, r.opts.Params, cast, r.opts.Engine, nil)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("selfplay: episode %d: %w", i, err)
	}
	res := &EpisodeResult{Index: i, Record: rec, Wall: time.Since(start)}
	var shaped [][]float64
	acked := map[string]bool{}
	if tr, ok := rec.Outcome.Terms.(TurnRewarder); ok {
		shaped = tr.TurnRewards()
		for _, e := range rec.Events {
			if e.Kind == engine.KindAck {
				acked[e.NotificationID] = true
			}
		}
	}
	for _, ms := range seats {
		tom, traced := r.tomScores(rec, ms)
		if traced {
			if res.ToM == nil {
				res.ToM = map[int]ToMScores{}
			}
			res.ToM[ms.seat.Index] = tom
		}
		if !ms.keep {
			continue
		}
		reward := rec.Outcome.Rewards[ms.seat.Index]
		if tom.Infer != nil {
			reward += r.opts.InferReward * *tom.Infer
		}
		trajs := ms.trajectories(reward)
		for k := range trajs {
			trajs[k].setToM(tom)
		}
		if ms.seat.Index < len(shaped) {
			if !creditTurns(trajs, shaped[ms.seat.Index], acked) {
				r.stats.unmatched.Add(1)
			}
		}
		res.Trajectories = append(res.Trajectories, trajs...)
	}
	if r.opts.Guard != nil {
		if err := guardTrajectories(ctx, r.opts.Guard, r.game.ID(), rec, res.Trajectories); err != nil {
			return nil, fmt.Errorf("selfplay: episode %d: %w", i, err)
		}
	}
	for k := range res.Trajectories {
		res.Trajectories[k].meta = nil
	}
	return res, nil
}

// release tells the backends that keep state per key (inference.Releaser)
// that episode i's sequences are finished, every seat and segment: their
// KV slots are then given up before those of episodes still in flight.
// Releasing twice is harmless, so a backend shared by several players is
// not deduplicated.
func (r *Runner) release(key string, i int) {
	prefix := key + "/e" + strconv.Itoa(i) + "/"
	ps := []*Player{r.policy, r.frozen}
	for _, p := range r.players {
		ps = append(ps, p)
	}
	for _, p := range ps {
		if p == nil {
			continue
		}
		if rel, ok := p.Backend.(inference.Releaser); ok {
			rel.Release(prefix)
		}
	}
}

// guardTrajectories runs g on every turn of trajs and records its reasons
// in TurnFlags. Whether the engine rejected a reply, or defaulted the
// decision after it, is read from the record: the events name the
// notification the reply answered.
func guardTrajectories(ctx context.Context, g TurnGuard, env string, rec *engine.Record, trajs []Trajectory) error {
	rejected := map[string]string{}
	defaulted := map[string]bool{}
	for _, e := range rec.Events {
		switch e.Kind {
		case engine.KindValidationError:
			rejected[e.NotificationID] = e.Text
		case engine.KindDefault:
			defaulted[e.NotificationID] = true
		}
	}
	for i := range trajs {
		t := &trajs[i]
		if len(t.meta) != len(t.TurnEnds) {
			return fmt.Errorf("guard: trajectory of seat %d has %d turns but %d turn records", t.Seat, len(t.TurnEnds), len(t.meta))
		}
		seat := engine.Seat{Index: t.Seat, Name: t.SeatName, Role: t.Role, Team: t.Team}
		t.TurnFlags = make([][]string, len(t.TurnEnds))
		for k, span := range t.TurnSpans() {
			m := t.meta[k]
			reply := t.Tokens[span[0] : span[1]+1]
			if m.eog {
				reply = reply[:len(reply)-1]
			}
			id := m.notification.ID
			reasons, err := g.Check(ctx, GuardTurn{
				Env: env, Episode: t.Episode, Seat: seat, Notification: m.notification,
				Prompt: t.Tokens[:span[0]:span[0]], Reply: reply[:len(reply):len(reply)], Text: m.text,
				Stop: m.stop, MaxTokens: m.maxTokens, Rejection: rejected[id], Defaulted: defaulted[id],
			})
			if err != nil {
				return fmt.Errorf("guard: seat %d turn %d: %w", t.Seat, k, err)
			}
			t.TurnFlags[k] = []string{}
			for _, r := range reasons {
				if r == "" {
					return fmt.Errorf("guard: seat %d turn %d: an empty reason", t.Seat, k)
				}
				if !slices.Contains(t.TurnFlags[k], r) {
					t.TurnFlags[k] = append(t.TurnFlags[k], r)
				}
			}
		}
	}
	return nil
}

// TurnRewarder is implemented by the outcome terms of environments that
// reward every turn (SOTOPIA's process reward): TurnRewards()[seat][k] is
// the shaped reward of the seat's k-th turn, the terminal reward included
// on its last turn.
type TurnRewarder interface {
	TurnRewards() [][]float64
}

// creditTurns puts a seat's shaped per-turn rewards on its trajectories'
// turns, in order across segments. They are credited only when every model
// turn was accepted (acked holds the notification ids the engine acked)
// and the counts agree: a retried or timed-out reply makes the seat's model
// turns differ from the environment's turns, and then no alignment is
// trustworthy — even when a rejected reply and a timeout leave the counts
// equal.
func creditTurns(trajs []Trajectory, rewards []float64, acked map[string]bool) bool {
	n := 0
	for _, t := range trajs {
		n += len(t.TurnEnds)
		for _, m := range t.meta {
			if !acked[m.notification.ID] {
				return false
			}
		}
	}
	if n != len(rewards) || n == 0 {
		return false
	}
	k := 0
	for i := range trajs {
		for j := range trajs[i].TurnRewards {
			trajs[i].TurnRewards[j] = rewards[k]
			k++
		}
		trajs[i].ShapedTurns = true
	}
	return true
}
