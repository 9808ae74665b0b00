package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// RolloutReport is what a rollout did: stats.json, plus the tally of its
// episodes for a summary.
type RolloutReport struct {
	selfplay.Stats
	// Backend counters of the policy's llama backend: decode steps
	// and sequences sampled per step (occupancy).
	BackendSteps int64   `json:"backend_steps,omitempty"`
	Occupancy    float64 `json:"occupancy,omitempty"`
	// BackendDecoded is the prompt and generated tokens the backend
	// decoded (reused_tokens were served from its cache instead);
	// EvictedLive and EvictedReleased count the cached sequences it
	// dropped of seats still playing and of finished episodes.
	BackendDecoded int64 `json:"backend_decoded_tokens,omitempty"`
	// SharedTokens are the reused tokens a slot kept from another seat's
	// stream (a common briefing prefix) or copied from it (Copies times).
	SharedTokens    int64 `json:"shared_tokens,omitempty"`
	Copies          int64 `json:"kv_copies,omitempty"`
	EvictedLive     int64 `json:"evicted_live,omitempty"`
	EvictedReleased int64 `json:"evicted_released,omitempty"`
	// DecodeSeconds is the time inside llama_decode; ScheduleWaitSeconds
	// the time the backend held running sequences back for a lane
	// preparing its next request (the deterministic schedule).
	DecodeSeconds       float64 `json:"decode_seconds,omitempty"`
	ScheduleWaitSeconds float64 `json:"schedule_wait_seconds,omitempty"`
	// ScheduleBypasses counts requests decoded out of the schedule's turn
	// (none in a reproducible run).
	ScheduleBypasses int64 `json:"schedule_bypasses,omitempty"`
	// DegenerateRate is the share of the policy's turns the guard
	// flagged; Degenerate counts turns and flags per reason.
	DegenerateRate float64      `json:"degenerate_rate"`
	Degenerate     *GuardCounts `json:"degenerate,omitempty"`

	// Env is the game's id; Trajectories the number written; Tally the
	// episodes' rewards per role and guard counts.
	Env          string `json:"-"`
	Trajectories int    `json:"-"`
	Tally        Tally  `json:"-"`
}

// Rollout plays o's episodes with the policy (and whatever else o's agents
// name) without training, writing trajectories.jsonl, episodes.jsonl and
// stats.json into dir. episode, when not nil, is called after each
// finished episode.
func Rollout(ctx context.Context, o RolloutOptions, dir string, episode func(done, total int)) (*RolloutReport, error) {
	if o.Env == "" {
		return nil, errors.New("no environment: set env in the config or --env")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	g, err := envs.Find(o.Env)
	if err != nil {
		return nil, err
	}
	specs, err := g.Seats(engine.Params(o.Params))
	if err != nil {
		return nil, err
	}
	ps, err := OpenPlayers(&o, len(specs))
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	ro, err := o.RunnerOptions(ps.Named)
	if err != nil {
		return nil, err
	}
	if g, err = AttachJudge(g, &o, ps, false); err != nil {
		return nil, err
	}
	runner, err := selfplay.NewRunner(g, ps.Policy, ps.Frozen, ro)
	if err != nil {
		return nil, err
	}
	w, err := newRolloutWriter(dir)
	if err != nil {
		return nil, err
	}
	rep := &RolloutReport{Env: g.ID()}
	done := 0
	st, runErr := runner.Run(ctx, o.FirstEpisode, o.Episodes, func(res *selfplay.EpisodeResult) error {
		done++
		if episode != nil {
			episode(done, o.Episodes)
		}
		rep.Trajectories += len(res.Trajectories)
		rep.Tally.Add(res)
		return w.write(res)
	})
	if err := errors.Join(runErr, w.close()); err != nil {
		return nil, err
	}
	rep.Stats = st
	if o.Guard != nil && o.Guard.Enabled {
		g := rep.Tally.Guard
		rep.DegenerateRate, rep.Degenerate = g.Rate(), &g
	}
	if ps.Llama != nil {
		bs := ps.Llama.Stats()
		rep.BackendSteps = bs.Steps
		rep.BackendDecoded, rep.EvictedLive, rep.EvictedReleased = bs.DecodedTokens, bs.EvictedLive, bs.EvictedReleased
		rep.SharedTokens, rep.Copies = bs.SharedTokens, bs.Copies
		rep.DecodeSeconds, rep.ScheduleWaitSeconds = bs.DecodeTime.Seconds(), bs.SessionWait.Seconds()
		rep.ScheduleBypasses = bs.ScheduleBypasses
		if bs.Steps > 0 {
			rep.Occupancy = float64(bs.GeneratedTokens) / float64(bs.Steps)
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "stats.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

// WriteSummary writes r for a person: the episodes and their throughput,
// each role's mean reward, the degenerate turns, and the files Rollout
// wrote into dir.
func (r *RolloutReport) WriteSummary(w io.Writer, dir string) {
	st := r.Stats
	fmt.Fprintf(w, "%d episodes of %s, %d trajectories, %d generated tokens in %.1fs (%.0f tok/s, %.1f sequences per decode step)\n",
		st.Episodes, r.Env, r.Trajectories, st.GeneratedTokens, st.Wall.Seconds(), st.TokensPerSecond(), r.Occupancy)
	for _, role := range r.Tally.Roles() {
		fmt.Fprintf(w, "  mean reward %-12s %.3f\n", role, r.Tally.RoleReward(role))
	}
	if g := r.Degenerate; g != nil {
		fmt.Fprintf(w, "  degenerate turns %d of %d (%.1f%%) %s\n", g.Flagged, g.Turns, 100*g.Rate(), g)
	}
	fmt.Fprintf(w, "wrote %s, %s and %s\n", filepath.Join(dir, runfiles.TrajectoriesFile),
		filepath.Join(dir, runfiles.EpisodesFile), filepath.Join(dir, "stats.json"))
}

// rolloutWriter writes trajectories and episode records as JSONL through
// jsonl writers: a full disk leaves both files ending in whole lines.
type rolloutWriter struct {
	traj, eps *jsonl.Writer
}

func newRolloutWriter(dir string) (*rolloutWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tw, err := jsonl.Create(filepath.Join(dir, runfiles.TrajectoriesFile))
	if err != nil {
		return nil, err
	}
	ew, err := jsonl.Create(filepath.Join(dir, runfiles.EpisodesFile))
	if err != nil {
		tw.Close()
		return nil, err
	}
	return &rolloutWriter{traj: tw, eps: ew}, nil
}

func (w *rolloutWriter) write(res *selfplay.EpisodeResult) error {
	for i := range res.Trajectories {
		if err := w.traj.Write(&res.Trajectories[i]); err != nil {
			return fmt.Errorf("write trajectory: %w", err)
		}
	}
	if err := w.eps.Write(res.Record); err != nil {
		return fmt.Errorf("write episode: %w", err)
	}
	return nil
}

func (w *rolloutWriter) close() error {
	return errors.Join(w.traj.Close(), w.eps.Close())
}
