package selfplay

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
)

// releasingLM is a fakeLM that implements inference.Releaser and checks
// that no request arrives under a prefix already released.
type releasingLM struct {
	*fakeLM
	mu       sync.Mutex
	released []string
	keys     []string // every key requested
	late     []string // keys requested after their prefix was released
}

func (r *releasingLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	r.mu.Lock()
	for _, q := range reqs {
		r.keys = append(r.keys, q.Key)
		for _, p := range r.released {
			if strings.HasPrefix(q.Key, p) {
				r.late = append(r.late, q.Key)
			}
		}
	}
	r.mu.Unlock()
	return r.fakeLM.Generate(ctx, reqs)
}

func (r *releasingLM) Release(prefixes ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, prefixes...)
}

// TestRunnerReleasesEpisodes: every episode's keys are released once,
// after its last request and under a prefix that names no other episode,
// and the episodes are those of a backend that cannot release.
func TestRunnerReleasesEpisodes(t *testing.T) {
	const n = 12 // e1 and e10, e11: the prefix must end at the slash
	lm := &releasingLM{fakeLM: newFakeLM(byteTokenizer{})}
	opts := testOptions(func(o *Options) { o.Parallel = 4 })
	r, err := NewRunner(sealedbid.New(), &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, n, func(res *EpisodeResult) error {
		got = append(got, res)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lm.late) > 0 {
		t.Errorf("requests after their episode was released: %v", lm.late)
	}
	if got, want := len(lm.released), n; got != want {
		t.Errorf("%d releases, want %d (one per episode): %v", got, want, lm.released)
	}
	for _, k := range lm.keys {
		matches := 0
		for _, p := range lm.released {
			if strings.HasPrefix(k, p) {
				matches++
			}
		}
		if matches != 1 {
			t.Errorf("key %q is under %d released prefixes, want 1 (%v)", k, matches, lm.released)
		}
	}
	want, _ := runAll(t, newFakeLM(byteTokenizer{}), nil, opts, n)
	if len(want) != len(got) {
		t.Fatalf("%d episodes, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := len(got[i].Trajectories), len(want[i].Trajectories); g != w {
			t.Errorf("episode %d: %d trajectories, want %d", i, g, w)
			continue
		}
		for k := range want[i].Trajectories {
			if !slices.Equal(got[i].Trajectories[k].Tokens, want[i].Trajectories[k].Tokens) {
				t.Errorf("episode %d trajectory %d: tokens differ from a backend without Release", i, k)
			}
		}
	}
}
