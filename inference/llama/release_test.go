package llama

import (
	"testing"

	"github.com/omar-selfplay/omar/inference"
)

// TestReleaseEvictsReleasedFirst plays two seats into a two-slot backend,
// the live one used longest ago, releases the other, and starts a third
// key: the released slot must be the one given up, so the live seat's next
// turn is served from its cache; without the release plain LRU evicts the
// live seat. The tokens are the same either way.
func TestReleaseEvictsReleasedFirst(t *testing.T) {
	o := testOptions(t)
	o.Parallel = 2
	sp := inference.Sampling{Temperature: 1, Seed: 5}
	type result struct {
		newcomer, live inference.Response
		stats          Stats
	}
	play := func(release []string) result {
		b := newBackend(t, o)
		live := prompt(t, b, "a live seat, waiting for its turn")
		done := prompt(t, b, "a seat whose episode ends")
		other := prompt(t, b, "a seat of a new episode")
		// The live seat's turn comes first, so it is the least recently
		// used slot when the newcomer arrives.
		r1 := gen(t, b, inference.Request{Key: "r1/e0/s0/g0", Prompt: live, MaxTokens: 6, Sampling: sp})[0]
		gen(t, b, inference.Request{Key: "r1/e1/s0/g0", Prompt: done, MaxTokens: 6, Sampling: sp})
		b.Release(release...)
		nr := gen(t, b, inference.Request{Key: "r1/e2/s0/g0", Prompt: other, MaxTokens: 6, Sampling: sp})[0]
		more, err := b.Tokenize("<|im_end|>\n<|im_start|>user\nyour turn<|im_end|>\n<|im_start|>assistant\n", false, true)
		if err != nil {
			t.Fatal(err)
		}
		next := append(append(append([]int32{}, live...), r1.Tokens...), more...)
		lr := gen(t, b, inference.Request{Key: "r1/e0/s0/g0", Prompt: next, MaxTokens: 6, Sampling: sp})[0]
		return result{newcomer: nr, live: lr, stats: b.Stats()}
	}
	with := play([]string{"r1/e1/"})
	without := play(nil)
	// "r1/e1" without the slash would also name e10…e19; "r1/e0/" is not
	// a prefix of the released key; "" is ignored rather than releasing all.
	decoys := play([]string{"", "r1/e1/s1/", "r1/e3/"})

	if with.live.ReusedTokens == 0 {
		t.Errorf("with the release the live seat reused %d tokens, want its cached turn", with.live.ReusedTokens)
	}
	if got, want := with.stats.EvictedReleased, int64(1); got != want {
		t.Errorf("with the release: released slots evicted %d, want %d", got, want)
	}
	if got, want := with.stats.EvictedLive, int64(0); got != want {
		t.Errorf("with the release: live slots evicted %d, want %d", got, want)
	}
	for name, r := range map[string]result{"without a release": without, "with decoy prefixes": decoys} {
		// Its slot gone, the live seat keeps only what its prompt shares
		// with the slot it gets (the chat template's first tokens).
		if r.live.ReusedTokens >= with.live.ReusedTokens {
			t.Errorf("%s the live seat reused %d tokens, want fewer than its own cache's %d (plain LRU evicts it)", name, r.live.ReusedTokens, with.live.ReusedTokens)
		}
		if got, want := r.stats.EvictedReleased, int64(0); got != want {
			t.Errorf("%s: released slots evicted %d, want %d", name, got, want)
		}
		// The newcomer takes the live seat's slot, whose next turn takes
		// the finished seat's.
		if got, want := r.stats.EvictedLive, int64(2); got != want {
			t.Errorf("%s: live slots evicted %d, want %d", name, got, want)
		}
	}
	if !sameTokens(with.newcomer.Tokens, without.newcomer.Tokens) || !sameTokens(with.live.Tokens, without.live.Tokens) {
		t.Errorf("tokens changed by the release: newcomer %v vs %v, live %v vs %v",
			with.newcomer.Tokens, without.newcomer.Tokens, with.live.Tokens, without.live.Tokens)
	}
	gain := with.live.ReusedTokens - without.live.ReusedTokens + with.newcomer.ReusedTokens - without.newcomer.ReusedTokens
	if got := with.stats.ReusedTokens - without.stats.ReusedTokens; got != int64(gain) {
		t.Errorf("backend reuse gained %d tokens by the release, want the seats' %d", got, gain)
	}
}

// TestReleaseReusedKey: a released key that comes back is served from its
// cache while its slot has not been taken, and is live again afterwards.
func TestReleaseReusedKey(t *testing.T) {
	o := testOptions(t)
	o.Parallel = 2
	b := newBackend(t, o)
	p := prompt(t, b, "a turn")
	gen(t, b, inference.Request{Key: "k/a", Prompt: p, MaxTokens: 4})
	b.Release("k/")
	r := gen(t, b, inference.Request{Key: "k/a", Prompt: p, MaxTokens: 4})[0]
	if got, want := r.ReusedTokens, len(p)-1; got != want {
		t.Errorf("released key reused %d tokens, want %d", got, want)
	}
	// Two newcomers: the first takes the empty slot, the second must
	// evict "k/a" as a live slot (the request above made it live again).
	gen(t, b, inference.Request{Key: "x", Prompt: p, MaxTokens: 2})
	gen(t, b, inference.Request{Key: "y", Prompt: p, MaxTokens: 2})
	st := b.Stats()
	if st.EvictedLive != 1 || st.EvictedReleased != 0 {
		t.Errorf("evicted live %d, released %d; want 1, 0", st.EvictedLive, st.EvictedReleased)
	}
}

// TestSharedPrefix: a new seat whose prompt starts as a finished seat's did
// takes that seat's released slot and decodes only from where the two
// differ; it samples the tokens a fresh backend samples. Keyless requests
// never share.
func TestSharedPrefix(t *testing.T) {
	o := testOptions(t)
	o.Parallel = 2
	sp := inference.Sampling{Temperature: 1, Seed: 7}
	b := newBackend(t, o)
	first := prompt(t, b, "You are the buyer. Your target price is 120. Turn 1/4.")
	second := prompt(t, b, "You are the buyer. Your target price is 95. Turn 1/4.")
	common := commonPrefix(first, second)
	if common < 5 || common == len(second) {
		t.Fatalf("test prompts share %d of %d tokens", common, len(second))
	}
	gen(t, b, inference.Request{Key: "r/e0/s0/g0", Prompt: first, MaxTokens: 4, Sampling: sp})
	gen(t, b, inference.Request{Key: "r/e0/s1/g0", Prompt: prompt(t, b, "the seller"), MaxTokens: 4, Sampling: sp})
	// Without a release the finished seat's slot is not offered (the
	// newcomer takes the least recently used slot, the buyer's, and keeps
	// what the prompts share all the same).
	b.Release("r/e0/")
	got := gen(t, b, inference.Request{Key: "r/e1/s0/g0", Prompt: second, MaxTokens: 4, Sampling: sp})[0]
	if got.ReusedTokens != common {
		t.Errorf("new seat reused %d tokens, want the %d its prompt shares with the finished buyer's", got.ReusedTokens, common)
	}
	if st := b.Stats(); st.SharedTokens != int64(common) || st.EvictedReleased != 1 || st.EvictedLive != 0 {
		t.Errorf("stats: shared %d, evicted released %d, live %d; want %d, 1, 0", st.SharedTokens, st.EvictedReleased, st.EvictedLive, common)
	}
	fresh := gen(t, newBackend(t, o), inference.Request{Key: "r/e1/s0/g0", Prompt: second, MaxTokens: 4, Sampling: sp})[0]
	if !sameTokens(got.Tokens, fresh.Tokens) {
		t.Errorf("tokens behind a shared prefix %v, from a fresh backend %v", got.Tokens, fresh.Tokens)
	}
	// A keyless request decodes its whole prompt.
	b.Release("r/e1/")
	if r := gen(t, b, inference.Request{Prompt: second, MaxTokens: 2, Sampling: sp})[0]; r.ReusedTokens != 0 {
		t.Errorf("keyless request reused %d tokens, want 0", r.ReusedTokens)
	}
}

// TestCopiedPrefix: a new seat whose prompt shares a long prefix with
// another seat's — one still playing, or one decoding it in the same step
// — gets that cache copied into its slot and decodes only the rest, and
// samples what a fresh backend samples; the other seat keeps its cache.
func TestCopiedPrefix(t *testing.T) {
	o := testOptions(t)
	o.Parallel = 3
	sp := inference.Sampling{Temperature: 1, Seed: 11}
	briefing := "Craigslist. You are the buyer of a used bicycle listed at 300 dollars; the seller wants as much as possible. "
	setup := func() (*Backend, []int32, []int32, int) {
		b := newBackend(t, o)
		first := prompt(t, b, briefing+"Your target is 120.")
		second := prompt(t, b, briefing+"Your target is 95.")
		common := commonPrefix(first, second)
		if common < minCopyTokens+1 {
			t.Fatalf("test prompts share %d tokens, want more than %d", common, minCopyTokens)
		}
		return b, first, second, common
	}
	b, first, second, common := setup()
	fresh := gen(t, newBackend(t, o), inference.Request{Key: "r/e1/s0/g0", Prompt: second, MaxTokens: 4, Sampling: sp})[0]

	t.Run("live", func(t *testing.T) {
		live := gen(t, b, inference.Request{Key: "r/e0/s0/g0", Prompt: first, MaxTokens: 4, Sampling: sp})[0]
		got := gen(t, b, inference.Request{Key: "r/e1/s0/g0", Prompt: second, MaxTokens: 4, Sampling: sp})[0]
		if got.ReusedTokens != common || !sameTokens(got.Tokens, fresh.Tokens) {
			t.Errorf("new seat reused %d tokens and sampled %v; want %d and %v", got.ReusedTokens, got.Tokens, common, fresh.Tokens)
		}
		if st := b.Stats(); st.Copies != 1 || st.SharedTokens != int64(common) || st.EvictedLive != 0 {
			t.Errorf("stats: copies %d, shared %d, evicted live %d; want 1, %d, 0", st.Copies, st.SharedTokens, st.EvictedLive, common)
		}
		next := append(append([]int32{}, first...), live.Tokens...)
		if r := gen(t, b, inference.Request{Key: "r/e0/s0/g0", Prompt: next, MaxTokens: 2, Sampling: sp})[0]; r.ReusedTokens < len(first) {
			t.Errorf("the live seat reused %d tokens after the copy, want its %d", r.ReusedTokens, len(first))
		}
	})
	t.Run("same step", func(t *testing.T) {
		b, first, second, common := setup()
		rs := gen(t, b,
			inference.Request{Key: "r/e0/s0/g0", Prompt: first, MaxTokens: 4, Sampling: sp},
			inference.Request{Key: "r/e1/s0/g0", Prompt: second, MaxTokens: 4, Sampling: sp})
		if rs[0].ReusedTokens != 0 || rs[1].ReusedTokens != common || !sameTokens(rs[1].Tokens, fresh.Tokens) {
			t.Errorf("reused %d and %d tokens, second sampled %v; want 0, %d and %v", rs[0].ReusedTokens, rs[1].ReusedTokens, rs[1].Tokens, common, fresh.Tokens)
		}
		if st := b.Stats(); st.Copies != 1 {
			t.Errorf("copies %d, want 1", st.Copies)
		}
	})
}
