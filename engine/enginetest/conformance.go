// Package enginetest is the conformance suite every environment runs:
// random legal play over many seeds terminates, the same seed gives the
// identical log, no seat ever receives an event outside its audience,
// rewards are finite and inside the declared range, and the invalid, stale
// and timeout paths of the runtime are exercised.
package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
)

// Options tune the suite.
type Options struct {
	// Seeds is how many seeds random play covers (default 40).
	Seeds int
	// Params are passed to every episode (nil = the game's defaults).
	Params engine.Params
	// EpisodeTimeout bounds one episode (default 20s).
	EpisodeTimeout time.Duration
}

func (o *Options) fill() {
	if o.Seeds <= 0 {
		o.Seeds = 40
	}
	if o.EpisodeTimeout <= 0 {
		o.EpisodeTimeout = 20 * time.Second
	}
}

// Conformance runs the whole suite on g.
func Conformance(t *testing.T, g engine.Game, opts ...Options) {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.fill()
	t.Run("metadata", func(t *testing.T) { checkMetadata(t, g, o) })
	t.Run("random_play", func(t *testing.T) {
		for seed := uint64(1); seed <= uint64(o.Seeds); seed++ {
			rec, obs := play(t, g, o, seed, 0)
			checkRecord(t, g, rec, obs)
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		for _, seed := range []uint64{3, 17, 1 << 40} {
			a, _ := play(t, g, o, seed, 0)
			b, _ := play(t, g, o, seed, 0)
			ja, jb := mustJSON(t, a), mustJSON(t, b)
			if !bytes.Equal(ja, jb) {
				t.Fatalf("seed %d: two plays differ: %s", seed, firstDiff(ja, jb))
			}
		}
	})
	t.Run("bad_actions", func(t *testing.T) {
		counts := map[engine.Kind]int{}
		stale, timeouts := 0, 0
		for seed := uint64(1); seed <= uint64(o.Seeds); seed++ {
			rec, obs := play(t, g, o, seed, 0.3)
			checkRecord(t, g, rec, obs)
			for _, e := range rec.Events {
				counts[e.Kind]++
				if e.Kind == engine.KindValidationError && bytes.Contains([]byte(e.Text), []byte("stale")) {
					stale++
				}
				if e.Kind == engine.KindDefault && bytes.Contains([]byte(e.Text), []byte("timeout")) {
					timeouts++
				}
			}
		}
		if counts[engine.KindValidationError] == 0 {
			t.Errorf("garbage replies never produced a validation error")
		}
		if stale == 0 {
			t.Errorf("stale replies were never rejected")
		}
		if timeouts == 0 || counts[engine.KindDefault] == 0 {
			t.Errorf("timeouts never applied a default")
		}
	})
}

func checkMetadata(t *testing.T, g engine.Game, o Options) {
	name, v := engine.SplitID(g.ID())
	if name == "" || v < 1 {
		t.Errorf("id %q is not versioned like name_v1", g.ID())
	}
	if g.Description() == "" {
		t.Errorf("%s has no description", g.ID())
	}
	seats, err := g.Seats(o.Params)
	if err != nil || len(seats) == 0 {
		t.Fatalf("Seats: got %v, %v; want at least one seat", seats, err)
	}
	lo, hi := g.RewardRange()
	if !(lo <= hi) {
		t.Errorf("reward range [%v, %v] is empty", lo, hi)
	}
	if _, err := engine.FindPolicy(g, "random"); err != nil {
		t.Errorf("%v", err)
	}
	if _, err := g.NewEpisode(1, engine.Params{"no_such_parameter_xyz": 1}); err == nil {
		t.Errorf("an unknown parameter was accepted")
	}
}

// observed collects what each agent was shown.
type observed struct {
	views [][]engine.Event // last view shown to each seat
	turns []engine.Turn
}

// play runs one episode with random agents; with probability bad a reply
// is garbage, stale or a timeout.
func play(t *testing.T, g engine.Game, o Options, seed uint64, bad float64) (*engine.Record, *observed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), o.EpisodeTimeout)
	defer cancel()
	pol, err := engine.FindPolicy(g, "random")
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	var mu = make(chan struct{}, 1)
	cast := func(s engine.Seat) (engine.Agent, string, error) {
		inner := pol.New(s, seeds.Derive(seed, uint64(s.Index)))
		rng := rand.New(rand.NewPCG(seeds.Derive(seed, 77, uint64(s.Index)), 1))
		return engine.AgentFunc(func(ctx context.Context, turn engine.Turn) (engine.Action, error) {
			mu <- struct{}{}
			obs.turns = append(obs.turns, turn)
			<-mu
			if bad > 0 && rng.Float64() < bad {
				switch rng.IntN(3) {
				case 0:
					return engine.Action{NotificationID: turn.Notification.ID, Text: "\x00{{ garbage ☃ }}"}, nil
				case 1:
					return engine.Action{NotificationID: "n-stale", Text: "anything"}, nil
				default:
					return engine.Action{}, fmt.Errorf("conformance agent: %w", engine.ErrTimeout)
				}
			}
			return inner.Act(ctx, turn)
		}), "random", nil
	}
	var rt *engine.Runtime
	rec, err := engine.Play(ctx, g, seed, o.Params, cast, engine.DefaultOptions(), func(r *engine.Runtime) { rt = r })
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if !rt.Log().Closed() {
		t.Errorf("seed %d: log not closed after play", seed)
	}
	obs.views = make([][]engine.Event, len(rec.Seats))
	for i := range rec.Seats {
		obs.views[i] = rt.Log().View(i)
	}
	return rec, obs
}

func checkRecord(t *testing.T, g engine.Game, rec *engine.Record, obs *observed) {
	t.Helper()
	n := len(rec.Seats)
	if len(rec.Events) == 0 || rec.Events[len(rec.Events)-1].Kind != engine.KindOutcome {
		t.Fatalf("seed %d: log does not end with an outcome event", rec.Seed)
	}
	open := map[int]string{} // seat -> open notification id
	last := map[int]string{} // seat -> latest notification id
	briefed := make([]bool, n)
	for i, e := range rec.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("seed %d: event %d has seq %d", rec.Seed, i, e.Seq)
		}
		for _, s := range e.Audience.Seats {
			if s < 0 || s >= n {
				t.Fatalf("seed %d: event %d audience names seat %d of %d", rec.Seed, e.Seq, s, n)
			}
		}
		switch e.Kind {
		case engine.KindBriefing:
			if e.Audience.All || len(e.Audience.Seats) != 1 {
				t.Errorf("seed %d: briefing %d is not private: %+v", rec.Seed, e.Seq, e.Audience)
			} else {
				briefed[e.Audience.Seats[0]] = true
			}
		case engine.KindNotification, engine.KindAction, engine.KindAck, engine.KindValidationError, engine.KindDefault:
			if e.Audience.All || !slices.Equal(e.Audience.Seats, []int{e.Seat}) {
				t.Errorf("seed %d: %s event %d reaches %+v, want only seat %d", rec.Seed, e.Kind, e.Seq, e.Audience, e.Seat)
			}
			if e.Kind == engine.KindNotification {
				if open[e.Seat] != "" {
					t.Errorf("seed %d: seat %d notified (%s) while %s is open", rec.Seed, e.Seat, e.NotificationID, open[e.Seat])
				}
				open[e.Seat] = e.NotificationID
				last[e.Seat] = e.NotificationID
			} else if e.NotificationID != open[e.Seat] && !(e.Kind == engine.KindDefault && e.NotificationID == last[e.Seat]) {
				// A default may follow the validation error that spent the
				// retry budget; everything else answers the open one.
				t.Errorf("seed %d: %s event %d answers %q, open is %q", rec.Seed, e.Kind, e.Seq, e.NotificationID, open[e.Seat])
			}
			if e.Kind == engine.KindAck || e.Kind == engine.KindDefault || e.Kind == engine.KindValidationError {
				open[e.Seat] = ""
			}
		}
	}
	for s, id := range open {
		if id != "" {
			t.Errorf("seed %d: seat %d's notification %s was never closed", rec.Seed, s, id)
		}
	}
	for s, b := range briefed {
		if !b {
			t.Errorf("seed %d: seat %d received no briefing", rec.Seed, s)
		}
	}
	// Each seat's view is exactly the audience-filtered log, and every
	// turn showed the seat a prefix of it.
	for s := 0; s < n; s++ {
		var want []engine.Event
		for _, e := range rec.Events {
			if e.Audience.Includes(s) {
				want = append(want, e)
			}
		}
		got := obs.views[s]
		if len(got) != len(want) {
			t.Fatalf("seed %d: seat %d view has %d events, audience filter gives %d", rec.Seed, s, len(got), len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq {
				t.Fatalf("seed %d: seat %d view event %d is seq %d, want %d", rec.Seed, s, i, got[i].Seq, want[i].Seq)
			}
		}
	}
	for _, turn := range obs.turns {
		s := turn.Seat.Index
		for _, e := range turn.View {
			if !e.Audience.Includes(s) {
				t.Fatalf("seed %d: seat %d was shown event %d (%s) addressed to %+v", rec.Seed, s, e.Seq, e.Kind, e.Audience)
			}
		}
		if len(turn.View) == 0 || turn.View[len(turn.View)-1].NotificationID != turn.Notification.ID {
			t.Errorf("seed %d: seat %d's view does not end with its notification %s", rec.Seed, s, turn.Notification.ID)
		}
	}
	lo, hi := g.RewardRange()
	if err := rec.Outcome.Validate(n, lo, hi); err != nil {
		t.Errorf("seed %d: %v", rec.Seed, err)
	}
	if rec.Outcome.Result == "" {
		t.Errorf("seed %d: outcome has no result", rec.Seed)
	}
	// The record must survive a JSON round trip (it is the JSONL format).
	b := mustJSON(t, rec)
	var back engine.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("seed %d: record does not decode: %v", rec.Seed, err)
	}
	if len(back.Events) != len(rec.Events) || back.Scenario == nil {
		t.Errorf("seed %d: record lost events or scenario in JSON", rec.Seed)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-200)
	return fmt.Sprintf("first difference at byte %d:\n  %s\n  %s", i, a[lo:min(len(a), i+200)], b[lo:min(len(b), i+200)])
}
