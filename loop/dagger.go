package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference"
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
	// Episodes per game, seat and opponent in each round.
	Episodes int
	// Opponents are the scripted policies the model plays against.
	Opponents []string
	// Expert is the scripted policy whose replies label the model's
	// states; the corpus environments that learn it are played.
	Expert string
	// Steps optimizer steps per round, from the previous round's weights
	// with a fresh optimizer, warm-up and cosine decay at LR.
	Steps int
	LR    float64
	// Weight is how often each labelled sequence is seen per epoch,
	// as CorpusEnv.Weight.
	Weight float64
}

// Validate reports the first invalid field.
func (o DaggerOptions) Validate() error {
	if o.Rounds == 0 {
		return nil
	}
	switch {
	case o.Rounds < 0 || o.Rounds > 100:
		return fmt.Errorf("dagger: rounds %d: want 0..100", o.Rounds)
	case o.Episodes < 1 || o.Episodes > maxCount:
		return fmt.Errorf("dagger: episodes %d: want 1..%d", o.Episodes, maxCount)
	case len(o.Opponents) == 0:
		return errors.New("dagger: no opponents")
	case o.Expert == "":
		return errors.New("dagger: no expert")
	case o.Steps < 1:
		return fmt.Errorf("dagger: steps %d < 1", o.Steps)
	case !(o.LR > 0 && o.LR < 1):
		return fmt.Errorf("dagger: lr %v: want 0 < lr < 1", o.LR)
	case !(o.Weight > 0 && o.Weight <= 100):
		return fmt.Errorf("dagger: weight %v: want 0 < weight ≤ 100", o.Weight)
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

func (s *DaggerStats) add(o DaggerStats) {
	s.Episodes += o.Episodes
	s.Skipped += o.Skipped
	s.Turns += o.Turns
	s.Agreed += o.Agreed
	s.SameMove += o.SameMove
	s.Sequences += o.Sequences
}

// daggerPlay plays one round: the model p on every seat of each game the
// corpus learns the expert in, against each opponent script, and returns
// the labelled sequences. Rollouts run one episode at a time, so the
// samples do not depend on the batching and a rebuild reproduces them.
func daggerPlay(ctx context.Context, c CorpusOptions, d DaggerOptions, round int, p *selfplay.Player, promptWeight float32, seed uint64) ([]train.Sequence, DaggerStats, error) {
	var st DaggerStats
	var out []train.Sequence
	for ei, e := range c.Envs {
		if !e.learns(d.Expert) || len(e.Learn) == 0 {
			continue
		}
		g, err := envs.Find(e.Env)
		if err != nil {
			return nil, st, err
		}
		ro := c.runnerOptions(e.Params)
		specs, err := g.Seats(ro.Params)
		if err != nil {
			return nil, st, fmt.Errorf("dagger: %s: %w", e.Env, err)
		}
		for seat := range specs {
			for oi, opp := range d.Opponents {
				o := ro
				o.Parallel = 1
				o.Seed = seeds.Derive(seed, 0x64616767, uint64(round), uint64(ei), uint64(seat), uint64(oi)) // "dagg"
				o.Agents = map[string]string{"seat" + strconv.Itoa(seat): selfplay.AgentPolicy, "*": "scripted:" + strings.TrimPrefix(opp, "scripted:")}
				o.KeyPrefix = fmt.Sprintf("dagger%d/%s/%d/%d/", round, e.Env, seat, oi)
				r, err := selfplay.NewRunner(g, p, nil, o)
				if err != nil {
					return nil, st, fmt.Errorf("dagger: %s: %w", e.Env, err)
				}
				_, err = r.Run(ctx, 0, d.Episodes, func(res *selfplay.EpisodeResult) error {
					seqs, es, err := labelEpisode(ctx, g, res.Record, res.Index, seat, d.Expert, p, o, promptWeight)
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
					return nil, st, fmt.Errorf("dagger: %s: %w", e.Env, err)
				}
			}
		}
	}
	return out, st, nil
}

// labelEpisode labels the model's seat of rec with the expert's replies
// and renders the sequences that teach them (labelledSequences). It fails
// on an episode it cannot label exactly: a seat that answered a
// notification more than once (a retry), a stream cut into segments.
func labelEpisode(ctx context.Context, g engine.Game, rec *engine.Record, idx, seat int, expert string, p *selfplay.Player, o selfplay.Options, promptWeight float32) ([]train.Sequence, DaggerStats, error) {
	var st DaggerStats
	replies, labels, err := expertLabels(ctx, g, rec, seat, expert)
	if err != nil {
		return nil, st, err
	}
	trajs, err := selfplay.Clone(ctx, g, rec, idx, p, o, []int{seat})
	if err != nil {
		return nil, st, err
	}
	if len(trajs) != 1 {
		return nil, st, fmt.Errorf("dagger: seat %d of episode %d renders %d segments", seat, idx, len(trajs))
	}
	seqs, err := labelledSequences(trajs[0], replies, labels, func(s string) ([]int32, error) { return selfplay.ReplyTokens(p.Tokenizer, s) }, promptWeight)
	if err != nil {
		return nil, st, err
	}
	st.Episodes, st.Turns, st.Sequences = 1, len(replies), len(seqs)
	for k := range replies {
		if replies[k] == labels[k] {
			st.Agreed++
		}
		if moveKind(replies[k]) == moveKind(labels[k]) {
			st.SameMove++
		}
	}
	return seqs, st, nil
}

// moveKind is a reply's first word without a trailing colon.
func moveKind(reply string) string {
	f := strings.Fields(reply)
	if len(f) == 0 {
		return ""
	}
	return strings.TrimSuffix(f[0], ":")
}

// expertLabels replays rec and asks the expert script, at each turn of
// seat, what it would reply in the state the recorded seat was in (its
// view holds the recorded seat's own earlier moves). It returns the
// seat's recorded replies and the expert's, in turn order.
func expertLabels(ctx context.Context, g engine.Game, rec *engine.Record, seat int, expert string) (replies, labels []string, err error) {
	queue := map[string][]string{}
	for _, e := range rec.Events {
		if e.Kind == engine.KindAction {
			queue[e.NotificationID] = append(queue[e.NotificationID], e.Text)
			if e.Seat == seat && len(queue[e.NotificationID]) > 1 {
				return nil, nil, fmt.Errorf("dagger: seat %d answered notification %s more than once", seat, e.NotificationID)
			}
		}
	}
	experts, err := engine.ScriptedCast(g, []string{expert}, seeds.Derive(rec.Seed, 0x6c61626c)) // "labl"
	if err != nil {
		return nil, nil, err
	}
	cast := func(s engine.Seat) (engine.Agent, string, error) {
		var ex engine.Agent
		if s.Index == seat {
			a, _, err := experts(s)
			if err != nil {
				return nil, "", err
			}
			ex = a
		}
		return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
			q := queue[t.Notification.ID]
			if len(q) == 0 {
				return engine.Action{}, engine.ErrTimeout
			}
			queue[t.Notification.ID] = q[1:]
			if ex != nil {
				a, err := ex.Act(ctx, t)
				if err != nil {
					return engine.Action{}, fmt.Errorf("dagger: expert: %w", err)
				}
				replies = append(replies, q[0])
				labels = append(labels, a.Text)
			}
			return engine.Action{NotificationID: t.Notification.ID, Text: q[0]}, nil
		}), "", nil
	}
	if _, err := engine.Play(ctx, g, rec.Seed, rec.Params, cast, engine.DefaultOptions(), nil); err != nil {
		return nil, nil, fmt.Errorf("dagger: replay: %w", err)
	}
	return replies, labels, nil
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
