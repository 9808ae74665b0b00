package selfplay

import (
	"context"
	"fmt"
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
