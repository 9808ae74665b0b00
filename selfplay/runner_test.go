package selfplay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

func testOptions(mod func(*Options)) Options {
	o := Options{}.Defaults()
	o.Seed = 7
	o.Parallel = 4
	o.MaxTokens = 24
	o.MinReplyTokens = 8
	o.Context = 1024
	o.Grammar = false
	// The fake backend does not merge concurrent calls: aggregate.
	o.BatchWindow = 2 * time.Millisecond
	if mod != nil {
		mod(&o)
	}
	return o
}

func runAll(t *testing.T, lm *fakeLM, frozen *fakeLM, opts Options, n int) ([]*EpisodeResult, Stats) {
	t.Helper()
	pol := &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}
	var fr *Player
	if frozen != nil {
		fr = &Player{Label: "frozen", Backend: frozen, Tokenizer: frozen.tok}
	}
	r, err := NewRunner(sealedbid.New(), pol, fr, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []*EpisodeResult
	st, err := r.Run(context.Background(), 0, n, func(res *EpisodeResult) error {
		out = append(out, res)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// actionTexts returns the texts of seat's action events, in order.
func actionTexts(rec *engine.Record, seat int) []string {
	var out []string
	for _, e := range rec.Events {
		if e.Kind == engine.KindAction && e.Seat == seat {
			out = append(out, e.Text)
		}
	}
	return out
}

// checkTokenInTokenOut checks every trajectory against the episode record
// and the fake model: the generated tokens of turn k, decoded (without the
// end-of-turn token), are the k-th action text the engine received, and
// the behaviour logprobs are the model's log-probabilities of those tokens
// after the stream's prefix.
func checkTokenInTokenOut(t *testing.T, lm *fakeLM, results []*EpisodeResult) {
	t.Helper()
	turns := 0
	for _, res := range results {
		bySeat := map[int][]Trajectory{}
		for _, tr := range res.Trajectories {
			if err := tr.Validate(); err != nil {
				t.Fatal(err)
			}
			bySeat[tr.Seat] = append(bySeat[tr.Seat], tr)
		}
		for seat, trs := range bySeat {
			acts := actionTexts(res.Record, seat)
			k := 0
			for _, tr := range trs {
				for j, span := range tr.TurnSpans() {
					reply := tr.Tokens[span[0] : span[1]+1]
					if lm.tok.EOG(reply[len(reply)-1]) {
						reply = reply[:len(reply)-1]
					}
					got, _ := lm.tok.Detokenize(reply)
					if k >= len(acts) {
						t.Fatalf("episode %d seat %d: %d turns, %d actions", res.Index, seat, k+1, len(acts))
					}
					if got != acts[k] {
						t.Errorf("episode %d seat %d turn %d: decoded %q, engine received %q", res.Index, seat, k, got, acts[k])
					}
					for i := span[0]; i <= span[1]; i++ {
						if want := lm.logprob(tr.Tokens[:i], tr.Tokens[i]); tr.Logprobs[i] != want || tr.RawLogprobs[i] != want/2 {
							t.Fatalf("episode %d seat %d token %d: logprob %v raw %v, recomputed %v", res.Index, seat, i, tr.Logprobs[i], tr.RawLogprobs[i], want)
						}
					}
					if tr.PolicyVersions[j] != lm.version {
						t.Errorf("policy version: got %d, want %d", tr.PolicyVersions[j], lm.version)
					}
					k++
					turns++
				}
			}
			if k != len(acts) {
				t.Errorf("episode %d seat %d: %d turns in trajectories, %d actions", res.Index, seat, k, len(acts))
			}
			if r := res.Record.Outcome.Rewards[seat]; trs[0].Reward != r {
				t.Errorf("episode %d seat %d: reward %v, outcome %v", res.Index, seat, trs[0].Reward, r)
			}
		}
	}
	if turns == 0 {
		t.Fatal("no turns at all")
	}
	if len(lm.violations) > 0 {
		t.Errorf("prompts that did not extend the previous prompt and reply of their key: %v", lm.violations)
	}
}

func TestRunnerTokenInTokenOut(t *testing.T) {
	tests := []struct {
		name string
		tok  byteTokenizer
		mod  func(*Options)
	}{
		{"plain", byteTokenizer{}, nil},
		{"special tokens rendered", byteTokenizer{renderSpecial: true}, nil},
		{"template trims replies", byteTokenizer{trim: true}, nil},
		{"grammar", byteTokenizer{}, func(o *Options) { o.Grammar = true }},
		{"no aggregator", byteTokenizer{}, func(o *Options) { o.BatchWindow = 0 }},
		{"small context", byteTokenizer{}, func(o *Options) { o.Context = 600 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lm := newFakeLM(tc.tok)
			res, st := runAll(t, lm, nil, testOptions(tc.mod), 6)
			checkTokenInTokenOut(t, lm, res)
			if tc.name == "small context" && st.Segments == 0 {
				t.Errorf("segments: got 0, want restarts with a 600-token context")
			}
			if tc.name == "template trims replies" && st.Breaks != 0 {
				t.Errorf("breaks: got %d, want 0 (the fallback delta should keep the stream)", st.Breaks)
			}
			if st.GeneratedTokens == 0 || st.Turns == 0 {
				t.Errorf("stats: %+v", st)
			}
		})
	}
}

// TestStreamIsTheConversation checks that a seat's stream, decoded with
// special tokens, is the chat template's rendering of what the seat saw
// and said (up to the newline the template puts after a sampled
// end-of-turn token).
func TestStreamIsTheConversation(t *testing.T) {
	tok := byteTokenizer{renderSpecial: true}
	lm := newFakeLM(tok)
	res, _ := runAll(t, lm, nil, testOptions(nil), 1)
	tr := res[0].Trajectories[0]
	text, _ := tok.Detokenize(tr.Tokens)
	if !strings.HasPrefix(text, "<s><|im_start|>system\nYou are bidder 1") {
		t.Errorf("stream starts %q, want the BOS and the briefing as system message", text[:min(60, len(text))])
	}
	if n := strings.Count(text, "<|im_start|>assistant\n"); n != len(tr.TurnEnds) {
		t.Errorf("assistant openings: got %d, want %d turns", n, len(tr.TurnEnds))
	}
	if !strings.Contains(text, "Your value for this round's item is") {
		t.Errorf("private value missing from the stream")
	}
	for _, other := range res[0].Trajectories {
		if other.Seat == 0 {
			continue
		}
		o, _ := tok.Detokenize(other.Tokens)
		if strings.Contains(o, "You are bidder 1 ") {
			t.Errorf("seat %d saw bidder 1's briefing", other.Seat)
		}
	}
}

func TestRunnerDeterministic(t *testing.T) {
	encode := func(res []*EpisodeResult) string {
		var b bytes.Buffer
		w := NewTrajectoryWriter(&b)
		for _, r := range res {
			for i := range r.Trajectories {
				w.Write(&r.Trajectories[i])
			}
			recs, _ := json.Marshal(r.Record)
			b.Write(recs)
		}
		w.Flush()
		return b.String()
	}
	a, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, testOptions(func(o *Options) { o.Parallel = 1 }), 5)
	b, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, testOptions(func(o *Options) { o.Parallel = 5 }), 5)
	if encode(a) != encode(b) {
		t.Errorf("parallel 1 and parallel 5 differ")
	}
	c, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, testOptions(func(o *Options) { o.Seed = 8 }), 5)
	if encode(a) == encode(c) {
		t.Errorf("seeds 7 and 8 gave the same episodes")
	}
}

func TestRunnerAgents(t *testing.T) {
	lm, frozen := newFakeLM(byteTokenizer{}), newFakeLM(byteTokenizer{})
	res, _ := runAll(t, lm, frozen, testOptions(func(o *Options) {
		o.Agents = map[string]string{"bidder1": "scripted:shading", "seat1": "frozen"}
	}), 3)
	for _, r := range res {
		labels := []string{}
		for _, s := range r.Record.Seats {
			labels = append(labels, s.Agent)
		}
		if want := []string{"scripted:shading", "frozen", "fake"}; !slices.Equal(labels, want) {
			t.Errorf("agents: got %v, want %v", labels, want)
		}
		for _, tr := range r.Trajectories {
			if tr.Seat != 2 {
				t.Errorf("trajectory of seat %d kept, want only the policy seat 2", tr.Seat)
			}
		}
	}
	if frozen.calls == 0 {
		t.Errorf("the frozen model was never called")
	}
	checkTokenInTokenOut(t, lm, res)

	if _, err := NewRunner(sealedbid.New(), &Player{Backend: lm, Tokenizer: lm.tok}, nil,
		testOptions(func(o *Options) { o.Agents = map[string]string{"*": "frozen"} })); err == nil {
		t.Errorf("frozen seats without a frozen model: got no error, want one")
	}
	if _, err := NewRunner(sealedbid.New(), nil, nil,
		testOptions(func(o *Options) { o.Agents = map[string]string{"*": "scripted:nope"} })); err == nil {
		t.Errorf("unknown scripted policy: got no error, want one")
	}
}

func TestBatcherFillsBatches(t *testing.T) {
	tests := []struct {
		name     string
		window   time.Duration
		minBatch float64
	}{
		{"aggregator", 20 * time.Millisecond, 8},
		{"direct", 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lm := newFakeLM(byteTokenizer{})
			_, st := runAll(t, lm, nil, testOptions(func(o *Options) { o.Parallel = 8; o.BatchWindow = tc.window }), 16)
			t.Logf("calls %d, requests %d, mean batch %.2f", st.Calls, st.Requests, st.MeanBatch())
			if st.MeanBatch() < tc.minBatch {
				t.Errorf("mean batch: got %.2f, want ≥ %v", st.MeanBatch(), tc.minBatch)
			}
			if int(st.Requests) != lm.requests || int(st.Calls) != lm.calls {
				t.Errorf("counted %d calls/%d requests, backend saw %d/%d", st.Calls, st.Requests, lm.calls, lm.requests)
			}
		})
	}
}

// slowLM blocks until its context is cancelled.
type slowLM struct{ fakeLM }

func (s *slowLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestRunnerCancel(t *testing.T) {
	lm := &slowLM{}
	r, err := NewRunner(sealedbid.New(), &Player{Backend: lm, Tokenizer: byteTokenizer{}}, nil, testOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = r.Run(ctx, 0, 4, func(*EpisodeResult) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's error", err)
	}
}

func TestTrajectoryJSONLRoundTrip(t *testing.T) {
	lm := newFakeLM(byteTokenizer{})
	res, _ := runAll(t, lm, nil, testOptions(nil), 2)
	var want []Trajectory
	var b bytes.Buffer
	w := NewTrajectoryWriter(&b)
	for _, r := range res {
		for i := range r.Trajectories {
			want = append(want, r.Trajectories[i])
			if err := w.Write(&r.Trajectories[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.Flush()
	got, err := ReadTrajectories(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip differs")
	}
	for _, bad := range []string{`{"mask":"01x"}`, `{"tokens":[1],"mask":"1"}`, `{"unknown":1}`} {
		if _, err := ReadTrajectories(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: got no error, want one", bad)
		}
	}
}

// TestDocsExample keeps the example of docs/trajectories.md readable by
// ReadTrajectories.
func TestDocsExample(t *testing.T) {
	b, err := os.ReadFile("../docs/trajectories.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "```json\n")
	j := strings.Index(s[i+8:], "```")
	if i < 0 || j < 0 {
		t.Fatal("no json example")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(s[i+8:i+8+j])); err != nil {
		t.Fatal(err)
	}
	trs, err := ReadTrajectories(&compact)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 || trs[0].Generated() != 6 {
		t.Fatalf("got %d trajectories, want 1 with 6 generated tokens", len(trs))
	}
	tok := byteTokenizer{renderSpecial: true}
	text, _ := tok.Detokenize(trs[0].Tokens)
	if want := "<s><|im_start|>user\nBid?<|im_end|>\n<|im_start|>assistant\nBID 7<|im_end|>"; text != want {
		t.Errorf("example decodes to %q, want %q", text, want)
	}
}

// sleepyLM answers some requests too late for the engine's timeout.
type sleepyLM struct{ *fakeLM }

func (s sleepyLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	if reqs[0].Sampling.Seed%4 == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return s.fakeLM.Generate(ctx, reqs)
}

// TestRunnerTimeouts: a seat whose reply times out gets the default, and
// its stream stays a well-formed conversation (the opened assistant turn
// is closed empty) that later turns extend append-only.
func TestRunnerTimeouts(t *testing.T) {
	tok := byteTokenizer{renderSpecial: true}
	lm := newFakeLM(tok)
	opts := testOptions(func(o *Options) {
		o.BatchWindow = 0
		o.Engine.Timeout = 30 * time.Millisecond
	})
	r, err := NewRunner(sealedbid.New(), &Player{Label: "fake", Backend: sleepyLM{lm}, Tokenizer: tok}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, 3, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
		t.Fatal(err)
	}
	timeouts := 0
	for _, e := range res {
		for _, ev := range e.Record.Events {
			if ev.Kind == engine.KindDefault && strings.HasPrefix(ev.Text, "timeout") {
				timeouts++
			}
		}
	}
	if timeouts == 0 {
		t.Fatal("no timeouts happened")
	}
	checkTokenInTokenOut(t, lm, res)
	for _, e := range res {
		for _, tr := range e.Trajectories {
			text, _ := tok.Detokenize(tr.Tokens)
			if strings.Contains(text, "<|im_start|>assistant\n<|im_start|>") {
				t.Errorf("episode %d seat %d: an assistant turn was left open", e.Index, tr.Seat)
			}
		}
	}
}

// FuzzReadTrajectories: any input either fails to read or yields
// trajectories that validate and survive a write/read round trip.
func FuzzReadTrajectories(f *testing.F) {
	f.Add(`{"tokens":[1,2],"mask":"01","logprobs":[0,-1],"raw_logprobs":[0,-1],"turn_ends":[1],"turn_rewards":[0],"policy_versions":[0]}`)
	f.Add(`{"mask":"01x"}`)
	f.Add(`{"tokens":[1],"mask":"1"}`)
	f.Add(`{"tokens":[5,6,7],"mask":"011","logprobs":[0,-1,-2],"raw_logprobs":[0,-1,-2],"turn_ends":[2,1],"turn_rewards":[0,0],"policy_versions":[0,0]}`)
	f.Fuzz(func(t *testing.T, s string) {
		trs, err := ReadTrajectories(strings.NewReader(s))
		if err != nil {
			return
		}
		var b bytes.Buffer
		w := NewTrajectoryWriter(&b)
		for i := range trs {
			if err := trs[i].Validate(); err != nil {
				t.Fatalf("read an invalid trajectory: %v", err)
			}
			if err := w.Write(&trs[i]); err != nil {
				t.Fatal(err)
			}
		}
		w.Flush()
		again, err := ReadTrajectories(&b)
		if err != nil || len(again) != len(trs) {
			t.Fatalf("round trip: %v, %d of %d", err, len(again), len(trs))
		}
	})
}

// TestRunnerScriptedBackend drives the runner through inference/scripted:
// the tiny models' real byte-level BPE vocabulary and ChatML template in
// pure Go. The rule bids the value it read in the seat's own stream, so the
// reply depends on the rendered prompt being the seat's conversation.
func TestRunnerScriptedBackend(t *testing.T) {
	rule := func(req inference.Request) string {
		last := req.Messages[len(req.Messages)-1].Content
		i := strings.LastIndex(last, "item is ")
		if i < 0 {
			return "BID 0"
		}
		v := strings.TrimSuffix(strings.Fields(last[i+len("item is "):])[0], ".")
		return "BID " + v
	}
	be, err := scripted.New(scripted.Options{Rule: rule})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(sealedbid.New(), &Player{Label: "scripted", Backend: be, Tokenizer: be}, nil, testOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, 3, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, e := range res {
		sc := e.Record.Scenario.(sealedbid.Scenario)
		for _, tr := range e.Trajectories {
			if err := tr.Validate(); err != nil {
				t.Fatal(err)
			}
			acts := actionTexts(e.Record, tr.Seat)
			for k, span := range tr.TurnSpans() {
				reply := tr.Tokens[span[0] : span[1]+1]
				if be.EOG(reply[len(reply)-1]) {
					reply = reply[:len(reply)-1]
				}
				got, _ := be.Detokenize(reply)
				if got != acts[k] {
					t.Errorf("episode %d seat %d turn %d: decoded %q, engine received %q", e.Index, tr.Seat, k, got, acts[k])
				}
				if want := "BID " + strconv.Itoa(sc.Values[k][tr.Seat]); got != want {
					t.Errorf("episode %d seat %d round %d: bid %q, want %q (the seat's own value)", e.Index, tr.Seat, k, got, want)
				}
			}
		}
	}
}

// shapedGame is the sealed-bid auction whose outcome also credits every
// turn (as SOTOPIA's process reward does): seat s's k-th turn earns
// (s+1)/10 + k/100, plus the outcome on its last turn.
type shapedGame struct{ engine.Game }

type shapedEpisode struct{ engine.Episode }

type shapedTerms struct {
	Rounds  any         `json:"rounds"`
	PerTurn [][]float64 `json:"per_turn"`
}

func (t shapedTerms) TurnRewards() [][]float64 { return t.PerTurn }

func (g shapedGame) NewEpisode(seed uint64, p engine.Params) (engine.Episode, error) {
	ep, err := g.Game.NewEpisode(seed, p)
	return shapedEpisode{ep}, err
}

func (e shapedEpisode) Outcome() engine.Outcome {
	o := e.Episode.Outcome()
	rounds := e.Episode.Scenario().(sealedbid.Scenario).Params.Rounds
	t := shapedTerms{Rounds: o.Terms}
	for s := range o.Rewards {
		var r []float64
		for k := range rounds {
			r = append(r, float64(s+1)/10+float64(k)/100)
		}
		r[len(r)-1] += o.Rewards[s]
		t.PerTurn = append(t.PerTurn, r)
	}
	o.Terms = t
	return o
}

func TestRunnerCreditsTurnRewards(t *testing.T) {
	lm := newFakeLM(byteTokenizer{})
	// Grammar on: the fake then always bids validly, so every seat has one
	// model turn per round and the rewards align.
	r, err := NewRunner(shapedGame{sealedbid.New()}, &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}, nil,
		testOptions(func(o *Options) { o.Grammar = true }))
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	st, err := r.Run(context.Background(), 0, 2, func(e *EpisodeResult) error { res = append(res, e); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.UnmatchedTurnRewards != 0 {
		t.Fatalf("unmatched turn rewards: %d", st.UnmatchedTurnRewards)
	}
	for _, e := range res {
		for _, tr := range e.Trajectories {
			want := e.Record.Outcome.Terms.(shapedTerms).PerTurn[tr.Seat]
			if !tr.ShapedTurns || !slices.Equal(tr.TurnRewards, want) {
				t.Errorf("episode %d seat %d: turn rewards %v (shaped %v), want %v", e.Index, tr.Seat, tr.TurnRewards, tr.ShapedTurns, want)
			}
		}
	}
	// Without the grammar some replies are retried: those seats keep zero
	// turn rewards and are counted.
	r, _ = NewRunner(shapedGame{sealedbid.New()}, &Player{Label: "fake", Backend: newFakeLM(byteTokenizer{}), Tokenizer: lm.tok}, nil, testOptions(nil))
	st, err = r.Run(context.Background(), 0, 4, func(e *EpisodeResult) error {
		for _, tr := range e.Trajectories {
			if !tr.ShapedTurns && slices.ContainsFunc(tr.TurnRewards, func(x float64) bool { return x != 0 }) {
				t.Errorf("unaligned seat got turn rewards %v", tr.TurnRewards)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.UnmatchedTurnRewards == 0 {
		t.Errorf("unmatched turn rewards: got 0, want the retried seats counted")
	}
}

// recordingGuard is the rule guard that also keeps every turn it saw.
type recordingGuard struct {
	rule *RuleGuard
	mu   sync.Mutex
	seen map[string]GuardTurn // by episode and notification id
}

func (g *recordingGuard) Check(ctx context.Context, t GuardTurn) ([]string, error) {
	g.mu.Lock()
	g.seen[strconv.Itoa(t.Episode)+"/"+t.Notification.ID] = t
	g.mu.Unlock()
	return g.rule.Check(ctx, t)
}

// TestRunnerGuard plays the fake model without a grammar (so it writes
// invalid moves, out-of-range bids and replies that run into MaxTokens)
// with the rule guard on, and checks each turn's flags against the episode
// record: a turn is flagged invalid exactly when the engine rejected the
// action it answered, defaulted exactly when the decision defaulted after
// it, and truncated exactly when its reply filled MaxTokens. The guard
// sees the reply without its end-of-turn token, the stream before it as
// the prompt, and the action text the engine received.
func TestRunnerGuard(t *testing.T) {
	lm := newFakeLM(byteTokenizer{})
	rule, err := NewRuleGuard(GuardOptions{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	g := &recordingGuard{rule: rule, seen: map[string]GuardTurn{}}
	res, _ := runAll(t, lm, nil, testOptions(func(o *Options) { o.Guard = g; o.Engine.MaxRetries = 1 }), 6)
	counts := map[string]int{}
	for _, r := range res {
		rejected, defaulted := map[string]bool{}, map[string]bool{}
		actions := map[int][]engine.Event{}
		for _, e := range r.Record.Events {
			switch e.Kind {
			case engine.KindValidationError:
				rejected[e.NotificationID] = true
			case engine.KindDefault:
				defaulted[e.NotificationID] = true
			case engine.KindAction:
				actions[e.Seat] = append(actions[e.Seat], e)
			}
		}
		next := map[int]int{} // a seat's next action, across segments
		for _, tr := range r.Trajectories {
			if len(tr.TurnFlags) != len(tr.TurnEnds) {
				t.Fatalf("seat %d: %d turn flags for %d turns", tr.Seat, len(tr.TurnFlags), len(tr.TurnEnds))
			}
			if err := tr.Validate(); err != nil {
				t.Fatal(err)
			}
			for k, span := range tr.TurnSpans() {
				act := actions[tr.Seat][next[tr.Seat]]
				next[tr.Seat]++
				seen, ok := g.seen[strconv.Itoa(tr.Episode)+"/"+act.NotificationID]
				if !ok {
					t.Fatalf("seat %d turn %d: the guard never saw notification %s", tr.Seat, k, act.NotificationID)
				}
				if seen.Text != act.Text {
					t.Errorf("seat %d turn %d: guard text %q, action %q", tr.Seat, k, seen.Text, act.Text)
				}
				if want := tr.Tokens[:span[0]]; !slices.Equal(seen.Prompt, want) {
					t.Errorf("seat %d turn %d: guard prompt of %d tokens, want %d", tr.Seat, k, len(seen.Prompt), len(want))
				}
				gen := tr.Tokens[span[0] : span[1]+1]
				if gen[len(gen)-1] == tokEnd {
					gen = gen[:len(gen)-1]
				}
				if !slices.Equal(seen.Reply, gen) {
					t.Errorf("seat %d turn %d: guard reply %v, want %v", tr.Seat, k, seen.Reply, gen)
				}
				truncated := span[1]-span[0]+1 == 24 && tr.Tokens[span[1]] != tokEnd
				for _, c := range []struct {
					flag string
					want bool
				}{
					{FlagInvalid, rejected[act.NotificationID]},
					{FlagDefaulted, defaulted[act.NotificationID]},
					{FlagTruncated, truncated},
				} {
					if got := slices.Contains(tr.TurnFlags[k], c.flag); got != c.want {
						t.Errorf("seat %d turn %d (%q): %s flagged %v, want %v (flags %q)", tr.Seat, k, act.Text, c.flag, got, c.want, tr.TurnFlags[k])
					}
				}
				for _, f := range tr.TurnFlags[k] {
					counts[f]++
				}
			}
		}
	}
	// The run must have exercised the rules this test checks.
	for _, f := range []string{FlagInvalid, FlagDefaulted, FlagTruncated} {
		if counts[f] == 0 {
			t.Errorf("no turn flagged %s in 6 episodes (counts %v)", f, counts)
		}
	}
	// Flagged turns survive the JSONL round trip.
	var b bytes.Buffer
	w := NewTrajectoryWriter(&b)
	var want []Trajectory
	for _, r := range res {
		for i := range r.Trajectories {
			want = append(want, r.Trajectories[i])
			if err := w.Write(&r.Trajectories[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.Flush()
	got, err := ReadTrajectories(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip of flagged trajectories differs")
	}
	if s := SampleOf(&want[0], nil); len(s.Flagged) != len(want[0].TurnEnds) {
		t.Errorf("SampleOf: %d flags for %d turns", len(s.Flagged), len(want[0].TurnEnds))
	}
}

// TestRunnerNoGuard: without a guard no flags are written.
func TestRunnerNoGuard(t *testing.T) {
	res, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, testOptions(nil), 2)
	for _, r := range res {
		for _, tr := range r.Trajectories {
			if tr.TurnFlags != nil {
				t.Errorf("seat %d: turn flags %q without a guard", tr.Seat, tr.TurnFlags)
			}
			if s := SampleOf(&tr, nil); s.Flagged != nil {
				t.Errorf("seat %d: sample flags without a guard", tr.Seat)
			}
		}
	}
}

// TestTrajectoryValidateFlags rejects flags that do not fit the turns.
func TestTrajectoryValidateFlags(t *testing.T) {
	base := Trajectory{
		Tokens: []int32{1, 2}, Mask: Mask{false, true}, Logprobs: []float32{0, -1}, RawLogprobs: []float32{0, -1},
		TurnEnds: []int{1}, TurnRewards: []float64{0}, PolicyVersions: []int{0},
	}
	tests := []struct {
		name  string
		flags [][]string
		ok    bool
	}{
		{"none", nil, true},
		{"clean", [][]string{{}}, true},
		{"flagged", [][]string{{FlagEmpty}}, true},
		{"too many", [][]string{{}, {}}, false},
		{"empty reason", [][]string{{""}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := base
			tr.TurnFlags = tt.flags
			if err := tr.Validate(); (err == nil) != tt.ok {
				t.Errorf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// failingGuard fails on its first turn (a judge whose backend is down).
type failingGuard struct{}

func (failingGuard) Check(context.Context, GuardTurn) ([]string, error) {
	return nil, errors.New("judge unavailable")
}

// emptyReasonGuard flags every turn with an empty reason (a guard bug).
type emptyReasonGuard struct{}

func (emptyReasonGuard) Check(context.Context, GuardTurn) ([]string, error) {
	return []string{""}, nil
}

// TestRunnerGuardErrors: a failing guard, or one that flags without a
// reason, ends the run with an error naming the problem.
func TestRunnerGuardErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		guard TurnGuard
		want  string
	}{
		{"failing", failingGuard{}, "judge unavailable"},
		{"empty reason", emptyReasonGuard{}, "empty reason"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lm := newFakeLM(byteTokenizer{})
			pol := &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}
			r, err := NewRunner(sealedbid.New(), pol, nil, testOptions(func(o *Options) { o.Guard = tt.guard }))
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Run(context.Background(), 0, 2, func(*EpisodeResult) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestTrimmedRepliesAreClosed: with a template that trims replies (as
// Llama 3's does), the stream falls back to the template's own rendering
// of the earlier messages; every reply must still be followed by the
// template's end-of-turn text ("<|im_end|>\n"), the sampled end-of-turn
// token standing for its first token. A reply that stopped at the token
// limit with a trailing space was left open.
func TestTrimmedRepliesAreClosed(t *testing.T) {
	tests := []struct {
		name string
		tok  byteTokenizer
	}{
		{"plain template", byteTokenizer{}},
		{"template trims replies", byteTokenizer{trim: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lm := newFakeLM(tc.tok)
			// 25 tokens cut "blah blah …" after a space.
			res, _ := runAll(t, lm, nil, testOptions(func(o *Options) { o.MaxTokens = 25 }), 6)
			checkTokenInTokenOut(t, lm, res)

			for _, e := range res {
				for _, tr := range e.Trajectories {
					for k, end := range tr.TurnEnds[:len(tr.TurnEnds)-1] {
						next := tr.Tokens[end+1:]
						if tr.Tokens[end] != tokEnd {
							if len(next) == 0 || next[0] != tokEnd {
								t.Errorf("episode %d seat %d turn %d: reply not closed: the stream goes on with %v", e.Index, tr.Seat, k, next[:min(3, len(next))])
								continue
							}
							next = next[1:]
						}
						if len(next) == 0 || next[0] != '\n' {
							t.Errorf("episode %d seat %d turn %d: got %v after the end of turn, want the template's newline", e.Index, tr.Seat, k, next[:min(3, len(next))])
						}
					}
				}
			}
		})
	}
}

// retryThenTimeoutLM answers seat 0 with an invalid reply, then a valid
// bid, then not at all (until its context ends); other seats bid validly.
type retryThenTimeoutLM struct {
	tok   byteTokenizer
	mu    sync.Mutex
	calls map[string]int
}

func (m *retryThenTimeoutLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	out := make([]inference.Response, len(reqs))
	for i, req := range reqs {
		text := "BID 3"
		if strings.Contains(req.Key, "/s0/") {
			m.mu.Lock()
			m.calls[req.Key]++
			n := m.calls[req.Key]
			m.mu.Unlock()
			switch n {
			case 1:
				text = "I pass."
			case 2:
				text = "BID 5"
			default:
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		toks, _ := m.tok.Tokenize(text, false, false)
		out[i] = inference.Response{Tokens: append(toks, tokEnd), Stop: inference.StopEOG}
	}
	return out, nil
}

func (m *retryThenTimeoutLM) Close() error { return nil }

// TestRunnerTurnRewardsRetryAndTimeout: seat 0 has two decisions; its first
// reply is rejected and retried, and its second decision times out, so it
// has two model turns for two decisions, but its first model turn answered
// nothing the environment rewarded. Counting turns is not enough to align
// the shaped rewards: the seat must be left unshaped (and counted).
func TestRunnerTurnRewardsRetryAndTimeout(t *testing.T) {
	lm := &retryThenTimeoutLM{calls: map[string]int{}}
	opts := testOptions(func(o *Options) {
		o.BatchWindow = 0
		o.Engine.Timeout = 50 * time.Millisecond
		o.Params = engine.Params{"rounds": 2, "bidders": 2}
	})
	r, err := NewRunner(shapedGame{sealedbid.New()}, &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	st, err := r.Run(context.Background(), 0, 1, func(e *EpisodeResult) error { res = append(res, e); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range res[0].Trajectories {
		if tr.Seat != 0 {
			continue
		}
		if len(tr.TurnEnds) != 2 {
			t.Fatalf("seat 0 has %d model turns, want 2 (the rejected reply and its retry)", len(tr.TurnEnds))
		}
		if tr.ShapedTurns || slices.ContainsFunc(tr.TurnRewards, func(x float64) bool { return x != 0 }) {
			t.Errorf("seat 0: turn rewards %v (shaped %v) credited to a rejected reply and its retry; want none", tr.TurnRewards, tr.ShapedTurns)
		}
	}
	if st.UnmatchedTurnRewards != 1 {
		t.Errorf("unmatched turn rewards: got %d, want 1 (seat 0)", st.UnmatchedTurnRewards)
	}
}
