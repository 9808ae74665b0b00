package arena

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// FirstEpisode is the selfplay episode index of held-out episode 0: the
// k-th episode of every pairing is the runner's episode FirstEpisode+k,
// dealt from seeds.Derive(Seed, 0, FirstEpisode+k) (selfplay.Runner.
// EpisodeSeed). Training deals episode i from seeds.Derive(seed, 0,
// i/GroupSize) with i counting up from 0. For a fixed seed, k ↦
// seeds.Derive(seed, 0, k) is a bijection of uint64 (each step xors the
// state with k plus a constant, then applies the invertible splitmix64
// finaliser), so no index below 2^62 gives an evaluation seed: with the
// training run's seed, no held-out deal seed is a training deal seed
// unless the run plays 2^62 episodes. Sampling and scripted seeds are
// derived from the same indices, so they are held out too.
const FirstEpisode = 1 << 62

// Hooks let a caller follow an evaluation (a progress bar). They are
// called from one goroutine at a time.
type Hooks struct {
	// Start is called once: total episodes of the evaluation, and how many
	// of them the directory already held (they are not played again).
	Start func(total, done int)
	// Episode is called after every episode played.
	Episode func(r Result)
}

// Evaluate plays every player against every opponent in every side of
// every environment, o.Episodes held-out episodes each, and returns the
// report. All pairings run at once, o.Parallel episodes in flight; model
// seats reach their players' backends concurrently, so a llama backend
// decodes the seats of every pairing together (one decode per adapter and
// step). Every pairing of an environment plays the same deals with the
// same sampling seeds (common random numbers), so players are compared
// episode by episode.
//
// With dir set, every finished episode is appended to dir/results.jsonl
// as it ends; a later Evaluate with the same dir and conditions plays only
// the episodes missing there (an interrupted evaluation resumes; more
// players or episodes extend one). An interrupted Evaluate returns ctx's
// error after the episodes in flight were dropped.
func Evaluate(ctx context.Context, o Options, dir string, players, opponents []Player, h Hooks) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := checkPlayers(players, opponents); err != nil {
		return nil, err
	}
	if o.Reference != "" && !slices.ContainsFunc(players, func(p Player) bool { return p.Name == o.Reference }) {
		return nil, fmt.Errorf("arena: reference %s is not a player", o.Reference)
	}
	es, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if err := checkPolicies(es, players, opponents); err != nil {
		return nil, err
	}
	var prior []Result
	if dir != "" {
		if prior, err = openDir(dir, o); err != nil {
			return nil, err
		}
	}
	cells := makeCells(es, players, opponents)
	have := map[resultKey]Result{}
	for _, r := range prior {
		have[r.key()] = r
	}
	var todo []work
	var results []Result
	for k := range o.Episodes {
		for _, c := range cells {
			r := Result{Env: c.env.Name, Side: c.side.Name, Player: c.player.Name, PlayerVersion: c.player.Version,
				Opponent: c.opponent.Name, OpponentVersion: c.opponent.Version, Episode: k}
			if old, ok := have[r.key()]; ok {
				results = append(results, old)
				continue
			}
			todo = append(todo, work{cell: c, episode: k})
		}
	}
	if h.Start != nil {
		h.Start(len(cells)*o.Episodes, len(results))
	}
	played, err := play(ctx, o, dir, len(prior), todo, h)
	results = append(results, played...)
	if err != nil {
		return nil, err
	}
	return newReport(o, es, players, opponents, results), nil
}

// checkPlayers rejects nameless, duplicate or incomplete players.
func checkPlayers(players, opponents []Player) error {
	if len(players) == 0 || len(opponents) == 0 {
		return errors.New("arena: need at least one player and one opponent")
	}
	byName := map[string]Player{}
	for _, list := range [][]Player{players, opponents} {
		names := map[string]bool{}
		for _, p := range list {
			if err := p.Validate(); err != nil {
				return fmt.Errorf("arena: %w", err)
			}
			if names[p.Name] {
				return fmt.Errorf("arena: player %s listed twice", p.Name)
			}
			names[p.Name] = true
			if q, ok := byName[p.Name]; ok && (q.Model != p.Model || q.Scripted != p.Scripted || q.Version != p.Version) {
				return fmt.Errorf("arena: two different players named %s", p.Name)
			}
			byName[p.Name] = p
		}
	}
	return nil
}

// checkPolicies rejects scripted players a game has no policy for.
func checkPolicies(es []*env, lists ...[]Player) error {
	for _, e := range es {
		for _, list := range lists {
			for _, p := range list {
				if p.Model == nil {
					if _, err := engine.ScriptedCast(e.game, []string{p.Agent()}, 0); err != nil {
						return fmt.Errorf("arena: player %s in %s: %w", p.Name, e.Name, err)
					}
				}
			}
		}
	}
	return nil
}

// cell is one pairing: a player in one side of one environment against
// one opponent in the other seats.
type cell struct {
	env              *env
	side             Side
	player, opponent Player
	index            int
}

func makeCells(es []*env, players, opponents []Player) []*cell {
	var out []*cell
	for _, e := range es {
		for _, s := range e.sides {
			for _, p := range players {
				for _, q := range opponents {
					out = append(out, &cell{env: e, side: s, player: p, opponent: q, index: len(out)})
				}
			}
		}
	}
	return out
}

type work struct {
	cell    *cell
	episode int
}

// play runs todo with o.Parallel episodes in flight and returns the
// results in todo's order, appending each to dir's results file first.
// Episodes finish in any order, but a result is written only once every
// result before it in todo has been: the files' line order is then fixed
// by the seed, whatever the parallelism or the timing, and an interrupted
// file holds a prefix of todo (a resumed evaluation plays the rest in the
// same order). prior is the number of results already in that file.
func play(ctx context.Context, o Options, dir string, prior int, todo []work, h Hooks) ([]Result, error) {
	if len(todo) == 0 {
		return nil, nil
	}
	rw := &resultWriter{hooks: h}
	if dir != "" {
		var err error
		if rw.out, rw.records, err = openResults(dir, o.Records, prior); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	finished := playAll(ctx, o, todo)
	var firstErr error
	// Finished episodes wait here until the ones before them in todo are
	// written: at most those that finished ahead of the slowest in flight.
	waiting := map[int]played{}
	next := 0
	for f := range finished {
		if firstErr != nil {
			continue
		}
		if f.err != nil {
			firstErr = f.err
			cancel()
			continue
		}
		waiting[f.i] = f
		for d, ok := waiting[next]; ok && firstErr == nil; d, ok = waiting[next] {
			delete(waiting, next)
			next++
			firstErr = rw.write(d)
		}
		if firstErr != nil {
			cancel()
		}
	}
	if err := rw.close(); firstErr == nil {
		firstErr = err
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return rw.results, firstErr
}

// openResults opens dir's results file, and its records file when
// records is set, for appending.
func openResults(dir string, records bool, prior int) (out, recs *jsonl.Writer, err error) {
	if out, _, err = jsonl.Append(filepath.Join(dir, ResultsFile)); err != nil {
		return nil, nil, err
	}
	if !records {
		return out, nil, nil
	}
	path := filepath.Join(dir, RecordsFile)
	// A record is written just before its result: an interrupt between
	// the two leaves one record whose episode is played again now. Drop
	// it, so that the file keeps one record per result.
	if err = keepLines(path, prior); err == nil {
		recs, _, err = jsonl.Append(path)
	}
	if err != nil {
		out.Close()
		return nil, nil, err
	}
	return out, recs, nil
}

// played is one episode of todo played, by its place in todo.
type played struct {
	i   int
	res Result
	rec *engine.Record
	err error
}

// playAll plays todo with o.Parallel episodes in flight, sending each
// as it finishes (in any order); the channel closes when all are done or
// ctx is cancelled.
func playAll(ctx context.Context, o Options, todo []work) <-chan played {
	finished := make(chan played)
	var wg sync.WaitGroup
	// Worker k plays todo[k], todo[k+workers], … in one session of the
	// players' backend when it keeps a deterministic schedule, opened
	// here before any worker starts: the same episodes then share the
	// same decode steps on every run (inference.Scheduler).
	workers := min(o.Parallel, len(todo))
	sched := scheduler(todo)
	for k := range workers {
		wctx := ctx
		var sess inference.Session
		if sched != nil {
			sess = sched.Session(k)
			wctx = inference.WithSession(ctx, sess)
		}
		wg.Go(func() {
			if sess != nil {
				defer sess.Close()
			}
			for i := k; i < len(todo); i += workers {
				if ctx.Err() != nil {
					return
				}
				res, rec, err := playOne(wctx, o, todo[i])
				select {
				case finished <- played{i, res, rec, err}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(finished)
	}()
	return finished
}

// resultWriter takes the results in todo's order: to the files (when
// open), to the hooks, and to results.
type resultWriter struct {
	out, records *jsonl.Writer
	hooks        Hooks
	results      []Result
}

func (rw *resultWriter) write(d played) error {
	if rw.records != nil {
		// Before the result: a resumed evaluation replays what has
		// no result, so a record is never missing (and keepLines
		// drops the copy an interrupt left).
		if err := rw.records.Write(d.rec); err != nil {
			return err
		}
		if err := rw.records.Flush(); err != nil {
			return err
		}
	}
	if rw.out != nil {
		// Flushed per episode: an interrupt loses only the episodes
		// in flight or waiting for an earlier one.
		if err := rw.out.Write(d.res); err != nil {
			return err
		}
		if err := rw.out.Flush(); err != nil {
			return err
		}
	}
	rw.results = append(rw.results, d.res)
	if rw.hooks.Episode != nil {
		rw.hooks.Episode(d.res)
	}
	return nil
}

// close closes the files and returns the first error.
func (rw *resultWriter) close() error {
	var first error
	for _, w := range []*jsonl.Writer{rw.out, rw.records} {
		if w != nil {
			if err := w.Close(); first == nil {
				first = err
			}
		}
	}
	return first
}

// scheduler returns the backend every model player of todo decodes on
// when it keeps a deterministic schedule; nil otherwise (scripts only,
// or players on several backends).
func scheduler(todo []work) inference.Scheduler {
	var be inference.Backend
	for _, w := range todo {
		for _, p := range []Player{w.cell.player, w.cell.opponent} {
			if p.Model == nil || p.Model.Backend == nil {
				continue
			}
			if be != nil && p.Model.Backend != be {
				return nil
			}
			be = p.Model.Backend
		}
	}
	s, _ := be.(inference.Scheduler)
	return s
}

// playOne plays episode w.episode of w's pairing.
func playOne(ctx context.Context, o Options, w work) (Result, *engine.Record, error) {
	c := w.cell
	ro := o.runnerOptions()
	ro.Params = c.env.episodeParams(o.ScenarioCount, w.episode)
	ro.Agents = c.side.Agents(c.player.Agent(), c.opponent.Agent())
	ro.KeyPrefix = "arena" + strconv.Itoa(c.index) + "/"
	for _, p := range []Player{c.player, c.opponent} {
		if p.Model != nil {
			if ro.Players == nil {
				ro.Players = map[string]*selfplay.Player{}
			}
			ro.Players[p.Agent()] = p.Model
		}
	}
	r, err := selfplay.NewRunner(c.env.game, nil, nil, ro)
	if err != nil {
		return Result{}, nil, fmt.Errorf("arena: %s %s %s vs %s: %w", c.env.Name, c.side.Name, c.player.Name, c.opponent.Name, err)
	}
	var rec *engine.Record
	var tom map[int]selfplay.ToMScores
	start := time.Now()
	_, err = r.Run(ctx, FirstEpisode+w.episode, 1, func(res *selfplay.EpisodeResult) error {
		rec, tom = res.Record, res.ToM
		return nil
	})
	if err != nil {
		return Result{}, nil, err
	}
	if rec == nil {
		return Result{}, nil, fmt.Errorf("arena: %s episode %d: no record after %v", c.env.Name, w.episode, time.Since(start))
	}
	res := newResult(rec, c.side, c.env, c.player, c.opponent, w.episode)
	res.ToM = newToMResult(rec, c.side, tom)
	return res, rec, nil
}

// seedOf is the deal seed of held-out episode k: what a selfplay runner
// with seed (group size 1) deals its episode FirstEpisode+k from.
func seedOf(seed uint64, k int) uint64 {
	return seeds.Derive(seed, 0, uint64(FirstEpisode+k))
}

// keepLines truncates the file at path after its first n lines when it has
// more (a missing file is left missing).
func keepLines(path string, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var off int64
	for range n {
		line, err := br.ReadSlice('\n')
		off += int64(len(line))
		for errors.Is(err, bufio.ErrBufferFull) { // a line longer than the buffer
			line, err = br.ReadSlice('\n')
			off += int64(len(line))
		}
		if errors.Is(err, io.EOF) {
			return nil // n lines or fewer
		}
		if err != nil {
			return err
		}
	}
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		return nil
	}
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("arena: %s: %w", path, err)
	}
	return nil
}
