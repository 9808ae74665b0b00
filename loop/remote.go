package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// ClusterOptions are the cluster section: the run's episodes are played
// by rollout workers (`omar worker`, or workers started in this process)
// that take work from a NATS JetStream server, while this process scores,
// estimates and trains (package cluster). Off by default.
type ClusterOptions struct {
	Enabled bool `yaml:"enabled"`
	// URL of a NATS server with JetStream; empty starts one embedded in
	// the learner, storing its streams under the run directory.
	URL string `yaml:"url"`
	// Listen is the embedded server's address: the default 127.0.0.1:0
	// (a free port, this machine only); 0.0.0.0:4222 lets workers on
	// other machines in.
	Listen string `yaml:"listen"`
	// Name tells runs sharing a server apart: it names the run's streams
	// and object store, and a worker's --name must match it.
	Name string `yaml:"name"`
	// Workers are rollout workers started in the learner's process, each
	// with its own llama.cpp context (0: only external workers).
	Workers int `yaml:"workers"`
	// Chunk is the number of consecutive episodes in one work item.
	Chunk int `yaml:"chunk"`
	// Staleness is how many policy versions an episode may lag behind the
	// policy it trains: 0 plays every iteration with the newest adapter
	// (the run equals a single-process run with the same seed); k > 0
	// publishes the next k iterations' work ahead, so workers keep
	// playing while the learner trains.
	Staleness int `yaml:"staleness"`
	// AckWait is how long a work item may go without a sign of life from
	// its worker before it is given to another (seconds; workers extend
	// it while they play).
	AckWait float64 `yaml:"ack_wait"`
}

// DefaultCluster is the cluster section when a config enables it without
// saying more: an embedded server on loopback, two in-process workers,
// chunks of 4 episodes, staleness 0, 30 s to redelivery.
func DefaultCluster() ClusterOptions {
	return ClusterOptions{Listen: "127.0.0.1:0", Name: "omar", Workers: 2, Chunk: 4, AckWait: 30}
}

// Validate reports the first invalid field.
func (c ClusterOptions) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case !ValidClusterName(c.Name):
		return fmt.Errorf("cluster.name %q: want 1–32 letters, digits, - or _", c.Name)
	case c.Workers < 0 || c.Workers > 64:
		return fmt.Errorf("cluster.workers %d: want 0..64", c.Workers)
	case c.Chunk < 1 || c.Chunk > 4096:
		return fmt.Errorf("cluster.chunk %d: want 1..4096", c.Chunk)
	case c.Staleness < 0 || c.Staleness > 64:
		return fmt.Errorf("cluster.staleness %d: want 0..64", c.Staleness)
	case !(c.AckWait >= 1 && c.AckWait <= 3600):
		return fmt.Errorf("cluster.ack_wait %v: want 1..3600 seconds", c.AckWait)
	}
	return nil
}

// AckWaitDuration is AckWait as a duration.
func (c ClusterOptions) AckWaitDuration() time.Duration {
	return time.Duration(c.AckWait * float64(time.Second))
}

// ValidClusterName reports whether s can name a run on a NATS server (it
// becomes part of subjects and stream names).
func ValidClusterName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Work is a range of episodes a run wants played elsewhere.
type Work struct {
	// Iteration is the iteration the episodes are for.
	Iteration int
	// First and N are the episode indices first … first+N−1 (each
	// episode's seeds derive from the run seed and its index).
	First, N int
	// Cast is each episode's league cast (the runner's Options.Cast);
	// nil entries and a nil map leave the policy on every seat.
	Cast map[int]map[int]string
	// Adapter is the iteration whose adapter the policy is at (0: the
	// starting weights), AdapterPath its file ("" for the model's own
	// weights). MinAdapter is the oldest adapter the episodes may be
	// played with.
	Adapter, MinAdapter int
	AdapterPath         string
	// Snapshots are the league's snapshot adapters by name (the
	// "league:NAME" agents of Cast).
	Snapshots map[string]string
}

// Episode is one episode played elsewhere.
type Episode struct {
	*selfplay.EpisodeResult
	// RecordJSON is the episode record as its worker encoded it; it is
	// written to episodes.jsonl as it is (a decoded record's free-form
	// parts would not encode back to the same bytes).
	RecordJSON json.RawMessage
	// Adapter is the iteration whose adapter played the episode.
	Adapter int
}

// EpisodeSource plays a run's episodes out of process (package cluster).
type EpisodeSource interface {
	// Publish offers work; it returns once the work is stored.
	Publish(ctx context.Context, w Work) error
	// Collect yields episodes first … first+n−1 in episode order, each
	// exactly once, every one played with an adapter of iteration ≥
	// minAdapter.
	Collect(ctx context.Context, first, n, minAdapter int, yield func(*Episode) error) (selfplay.Stats, error)
}

// SetEpisodeSource makes the run's rollouts come from src (nil: the run
// plays them itself). Call it before the first Step.
func (r *Run) SetEpisodeSource(src EpisodeSource) {
	r.source, r.published = src, r.state.Iteration
}

// publishAhead publishes the work of every iteration up to it+staleness
// not yet published, each with the current policy and league pool.
func (r *Run) publishAhead(ctx context.Context, it int) error {
	k := r.opts.Cluster.Staleness
	n := r.opts.Rollout.Episodes
	for j := r.published + 1; j <= min(it+k, r.opts.Iterations); j++ {
		w := Work{Iteration: j, First: r.state.Cursor + (j-it)*n, N: n,
			Adapter: r.state.Iteration, MinAdapter: max(0, j-1-k), AdapterPath: r.opts.Rollout.Adapter}
		if r.state.Adapter {
			w.AdapterPath = r.Path(runfiles.AdapterFile)
		}
		if r.league != nil {
			w.Cast, w.Snapshots = map[int]map[int]string{}, map[string]string{}
			for i := w.First; i < w.First+n; i++ {
				if c := r.league.cast(i); c != nil {
					w.Cast[i] = c
				}
				seat, op := r.league.draw(i)
				if op != nil {
					c := *op // the pool is rebuilt in place each iteration
					op = &c
				}
				r.draws[i] = leagueDraw{seat, op}
			}
			for _, s := range r.state.League.Snapshots {
				name := snapshotName(s)
				w.Snapshots[name] = r.snapshotPath(name)
			}
		}
		if err := r.source.Publish(ctx, w); err != nil {
			return fmt.Errorf("cluster: publish iteration %d: %w", j, err)
		}
		r.published = j
	}
	return nil
}

// collect is the rollout of iteration it through the episode source: it
// yields each episode's result, with its record's bytes, to yield.
func (r *Run) collect(ctx context.Context, it int, yield func(res *selfplay.EpisodeResult, record []byte, staleness int) error) (selfplay.Stats, error) {
	if err := r.publishAhead(ctx, it); err != nil {
		return selfplay.Stats{}, err
	}
	n := r.opts.Rollout.Episodes
	// The run's policy versions count adapter swaps (one per iteration)
	// from the run's start.
	now := r.swapper.PolicyVersion() + r.versionOffset
	minAdapter := max(0, it-1-r.opts.Cluster.Staleness)
	return r.source.Collect(ctx, r.state.Cursor, n, minAdapter, func(ep *Episode) error {
		lag := r.state.Iteration - ep.Adapter
		if lag < 0 || ep.Adapter < minAdapter {
			return fmt.Errorf("cluster: episode %d was played with the adapter of iteration %d, outside %d..%d", ep.Index, ep.Adapter, minAdapter, r.state.Iteration)
		}
		for i := range ep.Trajectories {
			for k := range ep.Trajectories[i].PolicyVersions {
				ep.Trajectories[i].PolicyVersions[k] = now - lag
			}
		}
		return yield(ep.EpisodeResult, ep.RecordJSON, lag)
	})
}

// Remote is the rollout side of a run in another process (a cluster
// worker): the run's game, its players and a runner set up as the run's
// own, so that an episode index plays the same episode here as there.
type Remote struct {
	runner  *selfplay.Runner
	players *Players
	cast    map[int]map[int]string
	loaded  map[string]bool
}

// OpenRemote opens the run o describes for playing its episodes: model
// is this machine's copy of the run's model file; label and context are
// the run's policy label and seat-stream context (RemoteInfo), which
// records and truncation depend on.
func OpenRemote(o Options, model, label string, context int) (_ *Remote, err error) {
	o.applyEnvDefaults()
	o.Rollout.Model, o.Rollout.Adapter = model, ""
	g, ps, err := openPolicyGame(&o.Rollout)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	x := &Remote{players: ps, loaded: map[string]bool{}}
	defer func() {
		if err != nil {
			ps.Close()
		}
	}()
	if have := min(ps.Llama.ContextPerSequence(), ps.Llama.Model().NCtxTrain()); have < context {
		return nil, fmt.Errorf("remote: this backend fits %d tokens per seat, the run plays %d (same model and rollout.context/parallel?)", have, context)
	}
	ps.Policy.Label = label
	ro, err := o.Rollout.RunnerOptions(ps.Named)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	ro.Context = context
	ro.Cast = func(i int) map[int]string { return x.cast[i] }
	if x.runner, err = selfplay.NewRunner(g, ps.Policy, ps.Frozen, ro); err != nil {
		return nil, err
	}
	if o.League.Enabled && o.League.Base {
		base := leagueModel(ps.Policy, "base", inference.AdapterBase)
		if err := x.runner.AddPlayer(leaguePlayer("base"), base); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// SetAdapter makes the policy sample with the adapter file at path ("":
// the model's own weights).
func (x *Remote) SetAdapter(ctx context.Context, path string) error {
	_, err := x.players.Llama.SetAdapter(ctx, path, 1)
	return err
}

// LoadSnapshot serves the league snapshot name from the file at path
// (once per name: a snapshot never changes).
func (x *Remote) LoadSnapshot(ctx context.Context, name, path string) error {
	if x.loaded[name] {
		return nil
	}
	if err := x.players.Llama.LoadAdapter(ctx, name, path, 1); err != nil {
		return fmt.Errorf("league: snapshot %s: %w", name, err)
	}
	p := leagueModel(x.players.Policy, name, name)
	if err := x.runner.AddPlayer(leaguePlayer(name), p); err != nil {
		return err
	}
	x.loaded[name] = true
	return nil
}

// Play plays episodes first … first+n−1 with the league casts cast and
// yields them in order. It is not safe for concurrent use.
func (x *Remote) Play(ctx context.Context, first, n int, cast map[int]map[int]string, yield func(*selfplay.EpisodeResult) error) (selfplay.Stats, error) {
	x.cast = cast
	return x.runner.Run(ctx, first, n, yield)
}

// Close releases the backends.
func (x *Remote) Close() error { return x.players.Close() }

// RemoteInfo is what a worker needs of a run besides its options: the
// policy's label (in every record) and the seat-stream context the run's
// runner plays with.
func (r *Run) RemoteInfo() (label string, context int) {
	return r.player.Label, r.runnerContext
}
