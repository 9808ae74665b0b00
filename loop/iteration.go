package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// batch carries an iteration's trainable items through its phases. Item
// j is the trajectory trajs[keep[j]] with its training sequence seqs[j]
// and, once scored, scores[j] (values, current and reference logprobs);
// the estimate phase writes item j's advantages and returns into
// seqs[j]. Only add and setScores grow it, so the index spaces cannot
// drift apart.
type batch struct {
	// trajs are every trajectory of the iteration, in the order their
	// episodes were taken; keep indexes those the trainer can take.
	trajs  []selfplay.Trajectory
	keep   []int
	seqs   []train.Sequence
	scores []train.Score
}

// add appends an episode's trajectories and returns the training
// sequences of those kept (Sequences), in order.
func (b *batch) add(res *selfplay.EpisodeResult) []train.Sequence {
	es, kept := Sequences(res.Trajectories)
	for _, k := range kept {
		b.keep = append(b.keep, len(b.trajs)+k)
	}
	b.seqs = append(b.seqs, es...)
	b.trajs = append(b.trajs, res.Trajectories...)
	return es
}

// item returns item j's trajectory.
func (b *batch) item(j int) *selfplay.Trajectory { return &b.trajs[b.keep[j]] }

// setScores gives the items their scores, one per item in order.
func (b *batch) setScores(scores []train.Score) error {
	if len(b.seqs) == 0 {
		return errors.New("no trajectories to train on (is any seat played by the policy?)")
	}
	if len(scores) != len(b.seqs) {
		return fmt.Errorf("trainer scored %d of %d sequences", len(scores), len(b.seqs))
	}
	b.scores = scores
	return nil
}

// tokens is the number of tokens of all items' sequences.
func (b *batch) tokens() int {
	n := 0
	for _, s := range b.seqs {
		n += len(s.Tokens)
	}
	return n
}

// iteration runs rollout → score → estimate → update → swap and returns
// the iteration's metrics.
func (r *Run) iteration(ctx context.Context, it int) (*runfiles.Metrics, error) {
	wall := time.Now()
	m := &runfiles.Metrics{Iteration: it, Reward: map[string]float64{}, Seconds: map[string]float64{}, TokensPerSec: map[string]float64{}}
	var b batch
	sc, files, err := r.rollout(ctx, it, m, &b)
	if err != nil {
		return nil, err
	}
	// From here on the iteration completes even when interrupted.
	ctx = context.WithoutCancel(ctx)
	if err := r.record(m, files); err != nil {
		sc.stop()
		return nil, err
	}
	if err := r.score(ctx, it, m, &b, sc); err != nil {
		return nil, err
	}
	if err := r.estimate(m, &b); err != nil {
		return nil, err
	}
	if err := r.update(ctx, it, m, &b); err != nil {
		return nil, err
	}
	if err := r.swap(ctx, it, m); err != nil {
		return nil, err
	}
	m.Seconds["iteration"] = time.Since(wall).Seconds()
	r.state.Iteration = it
	return m, nil
}

// rolloutSink takes the episodes of an iteration's rollout as they end:
// their league draws, trajectories, tallies and records.
type rolloutSink struct {
	r           *Run
	it, n       int
	b           *batch
	sc          *scorer
	tally       Tally
	leagueStats map[string]*runfiles.LeagueStat
	eps, trajs  bytes.Buffer
	tw          *selfplay.TrajectoryWriter
	enc         *json.Encoder
	done        int
}

func (s *rolloutSink) episode(res *selfplay.EpisodeResult, record []byte) error {
	r := s.r
	if r.league != nil {
		d, ok := r.draws[res.Index]
		if !ok {
			d.seat, d.op = r.league.draw(res.Index)
		}
		delete(r.draws, res.Index)
		r.league.tally(res, d, s.leagueStats)
	}
	es := s.b.add(res)
	if s.sc != nil && r.source != nil {
		s.sc.add(res.Index, es)
	}
	s.tally.Add(res)
	if r.opts.SaveTrajectories {
		for i := range res.Trajectories {
			if err := s.tw.Write(&res.Trajectories[i]); err != nil {
				return err
			}
		}
	}
	s.done++
	if r.Hooks.Episode != nil {
		r.Hooks.Episode(s.it, s.done, s.n)
	}
	if record != nil {
		s.eps.Write(record)
		return s.eps.WriteByte('\n')
	}
	return s.enc.Encode(res.Record)
}

// rollout plays the iteration's episodes into b and returns the files to
// record. The scoring pass runs beside it, episode by episode, when a
// core is left for it: the scorer is returned for the score phase (nil
// when scoring waits for it).
func (r *Run) rollout(ctx context.Context, it int, m *runfiles.Metrics, b *batch) (_ *scorer, _ rolloutFiles, err error) {
	r.phase(it, "rollout")
	start := time.Now()
	r.threads.Begin()
	var before llama.Stats
	lb, _ := r.swapper.(*llama.Backend)
	if lb != nil {
		before = lb.Stats()
	}
	s := &rolloutSink{r: r, it: it, n: r.opts.Rollout.Episodes, b: b}
	s.tw = selfplay.NewTrajectoryWriter(&s.trajs)
	s.enc = json.NewEncoder(&s.eps)
	if r.league != nil {
		r.league.prepare(r.state.League)
		s.leagueStats = map[string]*runfiles.LeagueStat{}
		s.tally.Agent = r.player.Label
	}
	if r.scoreBeside() {
		if err := r.threads.beside(r.trainer); err != nil {
			return nil, rolloutFiles{}, err
		}
		s.sc = startScorer(ctx, r.trainer, s.n)
		defer func() {
			if err != nil {
				// The rollout failed: stop after the episode being
				// scored, and leave the others.
				s.sc.stop()
			}
		}()
	}
	st, lagSum, err := r.playEpisodes(ctx, m, s)
	if err != nil {
		return nil, rolloutFiles{}, err
	}
	if s.done > 0 {
		m.Staleness = float64(lagSum) / float64(s.done)
	}
	m.Seconds["rollout"] = time.Since(start).Seconds()
	m.Episodes, m.Turns, m.GeneratedTokens = st.Episodes, st.Turns, st.GeneratedTokens
	m.TokensPerSec["rollout"] = st.TokensPerSecond()
	m.MeanBatch = st.MeanBatch() // requests per call when no llama backend counts its steps
	if lb != nil {
		after := lb.Stats()
		if steps := after.Steps - before.Steps; steps > 0 {
			m.MeanBatch = float64(after.GeneratedTokens-before.GeneratedTokens) / float64(steps)
		}
	}
	s.tally.fill(m)
	if r.league != nil {
		m.League = s.leagueStats
		r.league.update(&r.state.League, s.leagueStats)
	}
	if err := s.tw.Flush(); err != nil {
		return nil, rolloutFiles{}, err
	}
	return s.sc, rolloutFiles{episodes: s.eps.Bytes(), trajectories: s.trajs.Bytes()}, nil
}

// playEpisodes plays the rollout's episodes into s, from the episode
// source of a cluster run or the run's own runner, and returns the
// runner's statistics and the summed staleness of the episodes taken.
func (r *Run) playEpisodes(ctx context.Context, m *runfiles.Metrics, s *rolloutSink) (selfplay.Stats, int, error) {
	lagSum := 0
	if r.source != nil {
		st, err := r.collect(ctx, s.it, func(res *selfplay.EpisodeResult, record []byte, lag int) error {
			lagSum += lag
			m.StalenessMax = max(m.StalenessMax, lag)
			return s.episode(res, record)
		})
		return st, lagSum, err
	}
	// The scorer takes each episode as it ends, not in episode order: one
	// that ends late no longer holds up the ones after it.
	var finished func(*selfplay.EpisodeResult)
	if s.sc != nil {
		finished = func(res *selfplay.EpisodeResult) {
			es, _ := Sequences(res.Trajectories)
			s.sc.add(res.Index, es)
		}
	}
	st, err := r.runner.RunEach(ctx, r.state.Cursor, s.n, finished, func(res *selfplay.EpisodeResult) error {
		for i := range res.Trajectories {
			for k := range res.Trajectories[i].PolicyVersions {
				res.Trajectories[i].PolicyVersions[k] += r.versionOffset
			}
		}
		return s.episode(res, nil)
	})
	return st, lagSum, err
}

// rolloutFiles are what a rollout appends to the run directory once it is
// complete.
type rolloutFiles struct{ episodes, trajectories []byte }

// record appends the rollout's episodes (and trajectories) to the run
// directory and advances the scenario cursor.
func (r *Run) record(m *runfiles.Metrics, f rolloutFiles) error {
	if err := appendFile(r.Path(runfiles.EpisodesFile), f.episodes); err != nil {
		return err
	}
	if r.opts.SaveTrajectories {
		if err := appendFile(r.Path(runfiles.TrajectoriesFile), f.trajectories); err != nil {
			return err
		}
	}
	r.state.Cursor += r.opts.Rollout.Episodes
	m.Cursor = r.state.Cursor
	return nil
}

// score gives b's items their values and current and reference logprobs:
// those the scorer beside the rollout finished, and the rest here.
func (r *Run) score(ctx context.Context, it int, m *runfiles.Metrics, b *batch, sc *scorer) error {
	r.phase(it, "score")
	start := time.Now()
	var busy time.Duration
	var err error
	scored := []scoredEpisode{{seqs: b.seqs}}
	if sc != nil {
		// The scorer stops after its current episode; the episodes left
		// are scored here, one at a time as it would have, on the
		// training phase's threads.
		if scored, busy, err = sc.handOff(); err != nil {
			return err
		}
	}
	if m.TrainThreads, err = r.threads.Apply(r.trainer); err != nil {
		return err
	}
	tail := time.Now()
	var scores []train.Score
	for _, e := range scored {
		if e.scores == nil && len(e.seqs) > 0 {
			if e.scores, err = r.trainer.Evaluate(ctx, e.seqs); err != nil {
				return err
			}
		}
		scores = append(scores, e.scores...)
	}
	busy += time.Since(tail)
	if err := b.setScores(scores); err != nil {
		return err
	}
	// score is what the phase added to the iteration; score_busy the
	// scoring pass's own time, most of it beside the rollout.
	m.Seconds["score"] = time.Since(start).Seconds()
	m.Seconds["score_busy"] = busy.Seconds()
	m.TokensPerSec["score"] = float64(b.tokens()) / busy.Seconds()
	var gap, kl, vsum float64
	var nGen int
	for j := range b.keep {
		t, sc := b.item(j), &b.scores[j]
		sampled := t.SampledLogprobs(r.opts.Train.OverGrammar())
		for k, on := range t.Mask {
			if on {
				gap += math.Abs(float64(sampled[k] - sc.Logprobs[k]))
				kl += float64(sc.Logprobs[k] - sc.RefLogprobs[k])
				vsum += float64(sc.Values[k])
				nGen++
			}
		}
	}
	if nGen > 0 {
		m.LogprobGap, m.KLRef, m.ValueMean = gap/float64(nGen), kl/float64(nGen), vsum/float64(nGen)
	}
	return nil
}

// estimate turns b's rewards and values into per-token advantages and
// returns, and gives each item's sequence PPO's old logprobs and values.
func (r *Run) estimate(m *runfiles.Metrics, b *batch) error {
	start := time.Now()
	in := advantage.Input{Samples: make([]advantage.Sample, len(b.keep))}
	for j := range b.keep {
		in.Samples[j] = selfplay.SampleOf(b.item(j), b.scores[j].Values)
	}
	adv, err := r.est.Estimate(in)
	if err != nil {
		return err
	}
	var asum, asq float64
	nGen := 0
	current := r.swapper.PolicyVersion() + r.versionOffset
	for j := range b.seqs {
		s, sc := &b.seqs[j], &b.scores[j]
		s.OldLogprobs, s.OldValues, s.RefLogprobs = oldLogprobs(b.item(j), sc.Logprobs, current, r.opts.Train.OverGrammar()), sc.Values, sc.RefLogprobs
		s.Advantages, s.Returns = adv.Advantages[j], adv.Returns[j]
		for k, on := range s.Mask {
			if on {
				a := float64(adv.Advantages[j][k])
				asum, asq = asum+a, asq+a*a
				nGen++
			}
		}
	}
	if nGen > 0 {
		m.AdvantageMean = asum / float64(nGen)
		m.AdvantageStd = math.Sqrt(math.Max(0, asq/float64(nGen)-m.AdvantageMean*m.AdvantageMean))
	}
	m.Seconds["estimate"] = time.Since(start).Seconds()
	return nil
}

// update takes PPO's steps over b's sequences.
func (r *Run) update(ctx context.Context, it int, m *runfiles.Metrics, b *batch) error {
	r.phase(it, "update")
	start := time.Now()
	ts, err := r.trainer.Step(ctx, b.seqs)
	if err != nil {
		return err
	}
	m.Seconds["update"] = time.Since(start).Seconds()
	m.PolicyLoss, m.ValueLoss, m.KL = ts.Term(train.TermPolicy), ts.Term(train.TermValue), ts.Term(train.TermKL)
	m.Entropy, m.ClipFrac, m.GradNorm = ts.Term(train.TermEntropy), ts.Term(train.TermClipFrac), ts.GradNorm
	m.SequenceTokens, m.TrainedTokens, m.OptimizerSteps = ts.Tokens, ts.TrainedTokens, ts.OptimizerSteps
	m.TokensPerSec["update"] = float64(ts.Tokens) / m.Seconds["update"]
	return nil
}

// swap writes the new adapter, loads it into the inference backend and
// keeps a league snapshot when one is due.
func (r *Run) swap(ctx context.Context, it int, m *runfiles.Metrics) error {
	r.phase(it, "swap")
	start := time.Now()
	if err := r.trainer.SaveAdapter(r.Path(runfiles.AdapterFile)); err != nil {
		return err
	}
	if _, err := r.swapper.SetAdapter(ctx, r.Path(runfiles.AdapterFile), 1); err != nil {
		return err
	}
	r.state.Adapter = true
	if err := r.snapshot(ctx, it); err != nil {
		return err
	}
	m.Seconds["swap"] = time.Since(start).Seconds()
	return nil
}
