package selfplay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
)

// eachLM is fakeLM taking a move's requests in one submission
// (inference.EachGenerator); it records each submission's keys.
type eachLM struct {
	*fakeLM
	mu     sync.Mutex
	subs   [][]string
	direct int // Generate calls outside GenerateEach
}

func (e *eachLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	e.mu.Lock()
	e.direct++
	e.mu.Unlock()
	return e.fakeLM.Generate(ctx, reqs)
}

func (e *eachLM) GenerateEach(ctxs []context.Context, reqs []inference.Request) ([]inference.Response, []error) {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	e.mu.Lock()
	e.subs = append(e.subs, keys)
	e.mu.Unlock()
	out := make([]inference.Response, len(reqs))
	errs := make([]error, len(reqs))
	for i := range reqs {
		rs, err := e.fakeLM.Generate(ctxs[i], reqs[i:i+1])
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = rs[0]
	}
	return out, errs
}

// TestMoveInOneSubmission: the seats of a simultaneous move reach a backend
// that takes several requests at once in one submission, in seat order,
// with several episodes in flight; results equal those of the aggregator.
func TestMoveInOneSubmission(t *testing.T) {
	lm := &eachLM{fakeLM: newFakeLM(byteTokenizer{})}
	opts := testOptions(func(o *Options) { o.BatchWindow = 0 })
	r, err := NewRunner(sealedbid.New(), &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, 12, func(res *EpisodeResult) error {
		got = append(got, res)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if lm.direct != 0 {
		t.Errorf("%d Generate calls outside GenerateEach", lm.direct)
	}
	seats := len(got[0].Record.Seats)
	first := map[int]bool{}
	for _, keys := range lm.subs {
		ep, prev := -1, -1
		for _, k := range keys {
			var e, s, g int
			parts := strings.SplitN(k, "/", 2)
			if _, err := fmt.Sscanf(parts[len(parts)-1], "e%d/s%d/g%d", &e, &s, &g); err != nil {
				t.Fatalf("key %q: %v", k, err)
			}
			if ep >= 0 && e != ep {
				t.Errorf("submission %v mixes episodes", keys)
			}
			if s <= prev {
				t.Errorf("submission %v: seats not in order", keys)
			}
			ep, prev = e, s
		}
		if !first[ep] {
			first[ep] = true
			if len(keys) != seats {
				t.Errorf("episode %d's first move: %d requests in one submission, want all %d seats", ep, len(keys), seats)
			}
		}
	}
	if len(first) != 12 {
		t.Errorf("submissions from %d episodes, want 12", len(first))
	}

	// The same episodes through the aggregator.
	want, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, testOptions(nil), 12)
	for i := range want {
		if a, b := actionTexts(got[i].Record, 0), actionTexts(want[i].Record, 0); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("episode %d seat 0: %q, through the aggregator %q", i, a, b)
		}
	}
}

// schedLM is eachLM keeping a deterministic schedule: it records its
// sessions and that every request came under one.
type schedLM struct {
	*eachLM
	mu             sync.Mutex
	opened, closed int
	outside        int    // requests under no session of this backend
	fail           string // requests whose key holds it fail
}

type fakeSession struct {
	lm   *schedLM
	once sync.Once
}

func (s *schedLM) Session(int) inference.Session {
	s.mu.Lock()
	s.opened++
	s.mu.Unlock()
	return &fakeSession{lm: s}
}

func (f *fakeSession) GenerateEach(ctxs []context.Context, reqs []inference.Request) ([]inference.Response, []error) {
	return f.lm.GenerateEach(ctxs, reqs)
}

func (f *fakeSession) Scheduler() inference.Scheduler { return f.lm }

func (f *fakeSession) Close() {
	f.once.Do(func() {
		f.lm.mu.Lock()
		f.lm.closed++
		f.lm.mu.Unlock()
	})
}

func (s *schedLM) GenerateEach(ctxs []context.Context, reqs []inference.Request) ([]inference.Response, []error) {
	for _, c := range ctxs {
		if fs, ok := inference.SessionOf(c).(*fakeSession); !ok || fs.lm != s {
			s.mu.Lock()
			s.outside++
			s.mu.Unlock()
		}
	}
	out, errs := s.eachLM.GenerateEach(ctxs, reqs)
	for i, r := range reqs {
		if s.fail != "" && strings.Contains(r.Key, s.fail) {
			errs[i] = errors.New("broken " + s.fail)
		}
	}
	return out, errs
}

// TestLanes: with a backend that keeps a deterministic schedule the runner
// plays on lanes, one session each, every request under its lane's
// session; results come in episode order, equal to the aggregator's; the
// first error ends the run with that error, and every session is closed.
func TestLanes(t *testing.T) {
	newLM := func() *schedLM { return &schedLM{eachLM: &eachLM{fakeLM: newFakeLM(byteTokenizer{})}} }
	run := func(lm *schedLM, n int, yield func(*EpisodeResult) error) ([]*EpisodeResult, error) {
		opts := testOptions(func(o *Options) { o.BatchWindow = 0 })
		r, err := NewRunner(sealedbid.New(), &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []*EpisodeResult
		_, err = r.Run(context.Background(), 0, n, func(res *EpisodeResult) error {
			got = append(got, res)
			return yield(res)
		})
		return got, err
	}
	lm := newLM()
	got, err := run(lm, 10, func(*EpisodeResult) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if lm.opened != 4 || lm.closed != 4 || lm.outside != 0 || lm.direct != 0 {
		t.Errorf("%d sessions opened, %d closed, %d requests outside them, %d Generate calls; want 4, 4, 0, 0",
			lm.opened, lm.closed, lm.outside, lm.direct)
	}
	want, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, testOptions(nil), 10)
	for i := range want {
		if got[i].Index != i {
			t.Fatalf("result %d is episode %d", i, got[i].Index)
		}
		if a, b := actionTexts(got[i].Record, 1), actionTexts(want[i].Record, 1); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("episode %d seat 1: %q, through the aggregator %q", i, a, b)
		}
	}

	lm = newLM()
	stop := errors.New("enough")
	got, err = run(lm, 10, func(res *EpisodeResult) error {
		if res.Index == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(got) != 4 {
		t.Errorf("got %d results and %v, want 4 and %v", len(got), err, stop)
	}
	if lm.closed != lm.opened {
		t.Errorf("%d sessions opened, %d closed", lm.opened, lm.closed)
	}

	lm = newLM()
	lm.fail = "/e6/"
	got, err = run(lm, 10, func(*EpisodeResult) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "broken /e6/") || len(got) > 6 {
		t.Errorf("got %d results and %v, want at most 6 and episode 6's error", len(got), err)
	}
	if lm.closed != lm.opened {
		t.Errorf("%d sessions opened, %d closed", lm.opened, lm.closed)
	}
}

// TestRunEach: finished sees every episode once, as it ends and before
// yield receives the same result, on the lanes and on the free schedule.
func TestRunEach(t *testing.T) {
	for _, lanes := range []bool{true, false} {
		t.Run(fmt.Sprintf("lanes=%v", lanes), func(t *testing.T) {
			var lm inference.Backend = newFakeLM(byteTokenizer{})
			opts := testOptions(nil)
			if lanes {
				lm = &schedLM{eachLM: &eachLM{fakeLM: newFakeLM(byteTokenizer{})}}
				opts = testOptions(func(o *Options) { o.BatchWindow = 0 })
			}
			r, err := NewRunner(sealedbid.New(), &Player{Label: "fake", Backend: lm, Tokenizer: byteTokenizer{}}, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			ended := map[int]*EpisodeResult{}
			var order []int
			_, err = r.RunEach(context.Background(), 0, 10, func(res *EpisodeResult) {
				mu.Lock()
				defer mu.Unlock()
				if ended[res.Index] != nil {
					t.Errorf("episode %d ended twice", res.Index)
				}
				ended[res.Index] = res
			}, func(res *EpisodeResult) error {
				mu.Lock()
				defer mu.Unlock()
				if ended[res.Index] != res {
					t.Errorf("episode %d yielded before it was seen ending", res.Index)
				}
				order = append(order, res.Index)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(ended) != 10 || !slices.Equal(order, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
				t.Errorf("%d episodes seen ending, yielded %v; want 10, in episode order", len(ended), order)
			}
		})
	}
}
