package bc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// DaggerOptions are the rounds of dataset aggregation that follow
// behaviour cloning (DAgger, Ross, Gordon and Bagnell 2011). A model
// cloned from a script's play only ever saw the states the script
// reached; once its own replies differ a little — an offer a few dollars
// off, an ACCEPT one turn early — it is in states it never learnt and its
// errors compound. In each round the model plays the corpus's games
// against the scripts, the expert script says at every turn of the
// model's seat what it would have replied in that state, and training
// continues on the corpus together with every label gathered so far.
type DaggerOptions struct {
	// Rounds of play, labelling and training; 0 builds without DAgger.
	Rounds int
	// Games are played in each round; each must be an environment of the
	// corpus (its parameters are the corpus's).
	Games []DaggerGame
	// Episodes per game, side and opponent in each round.
	Episodes int
	// MaxPerSeat caps the labelled turns of one seat in an episode (spread
	// evenly over its disagreements; 0: no cap). Each is a sequence as
	// long as the seat's stream up to that turn, so long games need it.
	MaxPerSeat int
	// Steps optimizer steps per round, from the previous round's weights
	// with a fresh optimizer, warm-up and cosine decay at LR.
	Steps int
	LR    float64
	// Weight is how often each labelled sequence is seen per epoch,
	// as CorpusEnv.Weight.
	Weight float64
}

// DaggerGame is a game of the DAgger rounds: the model takes each side
// (arena.Sides: a role, a Werewolf team) against each opponent script,
// and the expert script labels its seats.
type DaggerGame struct {
	Env, Expert string
	Opponents   []string
}

// DaggerGames are the games DAgger plays by default: the six negotiation
// games, labelled by the strategic script, against the naive and the
// strategic one.
func DaggerGames() []DaggerGame {
	var out []DaggerGame
	for _, id := range envs.Negotiation {
		out = append(out, DaggerGame{Env: id, Expert: "strategic", Opponents: []string{"naive", "strategic"}})
	}
	return out
}

// DaggerGameFor is the DAgger game of an environment: a negotiation game
// as in DaggerGames, any other game with its default scripted policy as
// the expert and the opponent.
func DaggerGameFor(env string) (DaggerGame, error) {
	g, err := envs.Find(env)
	if err != nil {
		return DaggerGame{}, err
	}
	for _, d := range DaggerGames() {
		if d.Env == g.ID() || d.Env == env {
			return d, nil
		}
	}
	pols := g.Policies()
	if len(pols) == 0 {
		return DaggerGame{}, fmt.Errorf("dagger: %s has no scripted policy to label with", env)
	}
	return DaggerGame{Env: env, Expert: pols[0].Name, Opponents: []string{pols[0].Name}}, nil
}

// Validate reports the first invalid field.
func (o DaggerOptions) Validate() error {
	if o.Rounds == 0 {
		return nil
	}
	switch {
	case o.Rounds < 0 || o.Rounds > 100:
		return fmt.Errorf("dagger: rounds %d: want 0..100", o.Rounds)
	case o.Episodes < 1 || o.Episodes > loop.MaxCount:
		return fmt.Errorf("dagger: episodes %d: want 1..%d", o.Episodes, loop.MaxCount)
	case len(o.Games) == 0:
		return errors.New("dagger: no games")
	case o.MaxPerSeat < 0:
		return fmt.Errorf("dagger: max per seat %d < 0", o.MaxPerSeat)
	case o.Steps < 1:
		return fmt.Errorf("dagger: steps %d < 1", o.Steps)
	case !(o.LR > 0 && o.LR < 1):
		return fmt.Errorf("dagger: lr %v: want 0 < lr < 1", o.LR)
	case !(o.Weight > 0 && o.Weight <= 100):
		return fmt.Errorf("dagger: weight %v: want 0 < weight ≤ 100", o.Weight)
	}
	for _, g := range o.Games {
		game, err := envs.Find(g.Env)
		if err != nil {
			return fmt.Errorf("dagger: %w", err)
		}
		for _, name := range append([]string{g.Expert}, g.Opponents...) {
			if _, err := engine.FindPolicy(game, engine.ScriptedName(name)); err != nil {
				return fmt.Errorf("dagger: %s: %w", g.Env, err)
			}
		}
		if len(g.Opponents) == 0 {
			return fmt.Errorf("dagger: %s: no opponents", g.Env)
		}
	}
	return nil
}

// DaggerStats count one round's play and labels.
type DaggerStats struct {
	Episodes, Skipped int
	// Turns the model's seats played; Agreed of them the expert would
	// have answered with the same text, SameMove with the same kind of
	// move (the first word: PROPOSE, ACCEPT, REJECT, WALK).
	Turns, Agreed, SameMove int
	// Sequences the round added to the training set.
	Sequences int
}

// daggerPlay plays one round: the model p on each side of each game
// against each opponent script, and returns the labelled sequences.
// Rollouts run one episode at a time, so the samples do not depend on the
// batching and a rebuild reproduces them.
func daggerPlay(ctx context.Context, c CorpusOptions, d DaggerOptions, round int, p *selfplay.Player, promptWeight float32, seed uint64) ([]train.Sequence, DaggerStats, error) {
	var st DaggerStats
	var out []train.Sequence
	labelTokens, err := selfplay.ReplyTokenizer(p.Tokenizer)
	if err != nil {
		return nil, st, err
	}
	for gi, dg := range d.Games {
		ei := slices.IndexFunc(c.Envs, func(e CorpusEnv) bool { return e.Env == dg.Env })
		if ei < 0 {
			return nil, st, fmt.Errorf("dagger: %s is not an environment of the corpus", dg.Env)
		}
		g, err := envs.Find(dg.Env)
		if err != nil {
			return nil, st, err
		}
		ro := c.runnerOptions(c.Envs[ei].Params)
		sides, err := arena.Sides(g, ro.Params, nil)
		if err != nil {
			return nil, st, fmt.Errorf("dagger: %s: %w", dg.Env, err)
		}
		for si, side := range sides {
			for oi, opp := range dg.Opponents {
				o := ro
				o.Parallel = 1
				o.Seed = seeds.Derive(seed, 0x64616767, uint64(round), uint64(gi), uint64(si), uint64(oi)) // "dagg"
				o.Agents = side.Agents(p.Label, engine.ScriptedAgent(opp))
				o.KeyPrefix = fmt.Sprintf("dagger%d/%s/%d/%d/", round, dg.Env, si, oi)
				r, err := selfplay.NewRunner(g, p, nil, o)
				if err != nil {
					return nil, st, fmt.Errorf("dagger: %s: %w", dg.Env, err)
				}
				_, err = r.Run(ctx, 0, d.Episodes, func(res *selfplay.EpisodeResult) error {
					var seats []int
					for _, s := range res.Record.Seats {
						if side.Has(engine.Seat{Index: s.Index, Name: s.Name, Role: s.Role}) {
							seats = append(seats, s.Index)
						}
					}
					seqs, es, err := labelEpisode(ctx, g, res.Record, res.Index, seats, dg.Expert, p, labelTokens, o, promptWeight, d.MaxPerSeat)
					if err != nil {
						if ctx.Err() != nil {
							return ctx.Err()
						}
						st.Skipped++
						return nil
					}
					st.add(es)
					out = append(out, seqs...)
					return nil
				})
				if err != nil {
					return nil, st, fmt.Errorf("dagger: %s: %w", dg.Env, err)
				}
			}
		}
	}
	return out, st, nil
}

func (s *DaggerStats) add(o DaggerStats) {
	s.Episodes += o.Episodes
	s.Skipped += o.Skipped
	s.Turns += o.Turns
	s.Agreed += o.Agreed
	s.SameMove += o.SameMove
	s.Sequences += o.Sequences
}

// labelEpisode labels the model's seats of rec with the expert's replies
// and renders the sequences that teach them (labelledSequences, the labels
// tokenised by labelTokens, selfplay.ReplyTokenizer's), at most
// maxPerSeat per seat (0: all). It fails on an episode it cannot label
// exactly (a seat that answered a notification more than once: a retry)
// and leaves out a seat whose stream was cut into segments.
func labelEpisode(ctx context.Context, g engine.Game, rec *engine.Record, idx int, seats []int, expert string, p *selfplay.Player, labelTokens func(string) ([]int32, error), o selfplay.Options, promptWeight float32, maxPerSeat int) ([]train.Sequence, DaggerStats, error) {
	var st DaggerStats
	labelled, err := expertLabels(ctx, g, rec, seats, expert)
	if err != nil {
		return nil, st, err
	}
	// A reply the model wrote up to max_tokens has no end-of-turn token in
	// the record; its clone closes it with one, which the stream then
	// holds anyway (the chat template ends every turn with it).
	o.MaxTokens++
	trajs, err := selfplay.Clone(ctx, g, rec, idx, p, o, seats)
	if err != nil {
		return nil, st, err
	}
	streams := map[int]int{}
	for _, t := range trajs {
		streams[t.Seat]++
	}
	var out []train.Sequence
	for _, t := range trajs {
		l := labelled[t.Seat]
		if streams[t.Seat] > 1 {
			// The stream was cut into segments at the context limit: its
			// turns cannot be told apart from the record's; the seat is
			// left out.
			continue
		}
		seqs, err := labelledSequences(t, l.replies, l.labels, labelTokens, promptWeight)
		if err != nil {
			return nil, st, err
		}
		out = append(out, spread(seqs, maxPerSeat)...)
		st.Turns += len(l.replies)
		for k := range l.replies {
			if l.replies[k] == l.labels[k] {
				st.Agreed++
			}
			if moveKind(l.replies[k]) == moveKind(l.labels[k]) {
				st.SameMove++
			}
		}
	}
	st.Episodes, st.Sequences = 1, len(out)
	return out, st, nil
}

// spread keeps at most n of xs, evenly spaced (all when n is 0).
func spread[T any](xs []T, n int) []T {
	if n == 0 || len(xs) <= n {
		return xs
	}
	out := make([]T, n)
	for i := range n {
		out[i] = xs[i*len(xs)/n]
	}
	return out
}

// moveKind is a reply's first word without a trailing colon.
func moveKind(reply string) string {
	f := strings.Fields(reply)
	if len(f) == 0 {
		return ""
	}
	return strings.TrimSuffix(f[0], ":")
}

// seatLabels are a seat's recorded replies and the expert's, in turn order.
type seatLabels struct{ replies, labels []string }

// expertLabels replays rec and asks the expert script, at each turn of
// the seats, what it would reply in the state the recorded seat was in
// (its view holds the recorded seat's own earlier moves).
func expertLabels(ctx context.Context, g engine.Game, rec *engine.Record, seats []int, expert string) (map[int]*seatLabels, error) {
	queue := map[string][]string{}
	for _, e := range rec.Events {
		if e.Kind == engine.KindAction {
			queue[e.NotificationID] = append(queue[e.NotificationID], e.Text)
			if slices.Contains(seats, e.Seat) && len(queue[e.NotificationID]) > 1 {
				return nil, fmt.Errorf("dagger: seat %d answered notification %s more than once", e.Seat, e.NotificationID)
			}
		}
	}
	experts, err := engine.ScriptedCast(g, []string{expert}, seeds.Derive(rec.Seed, 0x6c61626c)) // "labl"
	if err != nil {
		return nil, err
	}
	out := map[int]*seatLabels{}
	var mu sync.Mutex // seats asked together (ask_all) act concurrently
	cast := func(s engine.Seat) (engine.Agent, string, error) {
		var ex engine.Agent
		if slices.Contains(seats, s.Index) {
			a, _, err := experts(s)
			if err != nil {
				return nil, "", err
			}
			ex = a
			out[s.Index] = &seatLabels{}
		}
		return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
			mu.Lock()
			q := queue[t.Notification.ID]
			if len(q) > 0 {
				queue[t.Notification.ID] = q[1:]
			}
			mu.Unlock()
			if len(q) == 0 {
				return engine.Action{}, engine.ErrTimeout
			}
			if ex != nil {
				a, err := ex.Act(ctx, t)
				if err != nil {
					return engine.Action{}, fmt.Errorf("dagger: expert: %w", err)
				}
				l := out[s.Index] // one seat's turns are sequential
				l.replies = append(l.replies, q[0])
				l.labels = append(l.labels, a.Text)
			}
			return engine.Action{NotificationID: t.Notification.ID, Text: q[0]}, nil
		}), "", nil
	}
	if _, err := engine.Play(ctx, g, rec.Seed, rec.Params, cast, engine.DefaultOptions(), nil); err != nil {
		return nil, fmt.Errorf("dagger: replay: %w", err)
	}
	return out, nil
}

// labelledSequences turns one cloned seat stream t, whose turns k the seat
// answered with replies[k] where the expert would have said labels[k],
// into training sequences, every token trained as in behaviour cloning
// (prompt tokens at promptWeight, replies at 1) except the seat's own
// replies that the expert would not have given (weight 0: they are
// context, not targets). Each turn whose reply differs from the label
// gives one sequence: the stream up to that turn's reply, then the
// label's tokens (labelTokens) in its place. A stream whose every reply
// is the label's is one sequence, t itself.
func labelledSequences(t selfplay.Trajectory, replies, labels []string, labelTokens func(string) ([]int32, error), promptWeight float32) ([]train.Sequence, error) {
	if len(replies) != len(labels) {
		return nil, fmt.Errorf("dagger: %d replies, %d labels", len(replies), len(labels))
	}
	var starts, ends []int // each turn's reply: tokens [starts[k], ends[k])
	for i, m := range t.Mask {
		if m && (i == 0 || !t.Mask[i-1]) {
			starts = append(starts, i)
		}
		if m && (i+1 == len(t.Mask) || !t.Mask[i+1]) {
			ends = append(ends, i+1)
		}
	}
	if len(starts) != len(replies) || len(starts) == 0 || starts[0] == 0 {
		return nil, fmt.Errorf("dagger: the stream has %d replies, the record %d", len(starts), len(replies))
	}
	weigh := func(n, upto int) ([]bool, []float32) {
		mask := make([]bool, n)
		w := make([]float32, n)
		for i := range n {
			mask[i], w[i] = true, promptWeight
		}
		for k := range upto {
			for i := starts[k]; i < ends[k]; i++ {
				w[i] = 1
				if replies[k] != labels[k] {
					mask[i], w[i] = false, 0
				}
			}
		}
		return mask, w
	}
	var out []train.Sequence
	for k := range replies {
		if replies[k] == labels[k] {
			continue
		}
		lab, err := labelTokens(labels[k])
		if err != nil {
			return nil, err
		}
		tokens := append(slices.Clip(t.Tokens[:starts[k]]), lab...)
		mask, w := weigh(len(tokens), k)
		for i := starts[k]; i < len(tokens); i++ {
			mask[i], w[i] = true, 1
		}
		out = append(out, train.Sequence{Tokens: tokens, Mask: mask, Weights: w})
	}
	if len(out) == 0 {
		mask, w := weigh(len(t.Tokens), len(replies))
		out = append(out, train.Sequence{Tokens: t.Tokens, Mask: mask, Weights: w})
	}
	return out, nil
}

// labelPlayer is the token-level player of a DAgger round's model.
func labelPlayer(b interface {
	inference.Backend
	inference.Tokenizer
}) *selfplay.Player {
	return &selfplay.Player{Label: selfplay.AgentPolicy, Backend: b, Tokenizer: b}
}
