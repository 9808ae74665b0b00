package selfplay

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/craigslist"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// BenchmarkRollout measures the runner with the tiny model on Craigslist
// (structured moves, grammar on) against the backend's raw batched decode
// rate, two ways:
//
//	tok/s        generated tokens per second of the runner (prefill included)
//	decode_tok/s generated tokens per second of llama_decode alone over the
//	             rollout's own batches (the backend's DecodeTime): the raw
//	             rate at exactly the rollout's batch sizes, prompt lengths
//	             and KV depths
//	ratio        tok/s ÷ decode_tok/s (target ≥ 0.9): what the runner, the
//	             engine and the decode loop cost on top of llama_decode
//	raw_tok/s    a synthetic reference (llama.BenchDecodeChunked): a bare
//	             llama_decode loop at the width the rollout reached (its
//	             occupancy, rounded), the backend's n_batch, and the
//	             rollout's prompt tokens per generated token, every prompt
//	             decoded from position 0
//	raw_ratio    tok/s ÷ raw_tok/s: a conservative bound, since the
//	             rollout's later turns decode behind a cached conversation,
//	             where each prompt token's attention costs more
//	occupancy    sequences sampled per llama_decode step in the rollout
//	req/call     requests per Generate call
//
// go test ./selfplay -run '^$' -bench Rollout -benchtime 5x
func BenchmarkRollout(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(path, model.Options{}.Defaults()); err != nil {
		b.Fatal(err)
	}
	lib := llamacpp.DefaultLibDir("")
	g := craigslist.New()
	for _, episodes := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("episodes=%d", episodes), func(b *testing.B) {
			o := llama.Options{}.Defaults()
			o.LibDir, o.Model = lib, path
			o.Parallel, o.Context = 2*episodes, 4096
			o.Threads, o.ThreadsBatch = 1, 1
			o.KVType = llamacpp.KVTypeF32
			be, err := llama.New(o)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			ro := Options{}.Defaults()
			ro.Parallel, ro.MaxTokens, ro.Context = episodes, 40, 4096
			ro.Params = engine.Params{"structured_only": true, "rounds": 3}
			r, err := NewRunner(g, &Player{Label: "tiny", Backend: be, Tokenizer: be}, nil, ro)
			if err != nil {
				b.Fatal(err)
			}
			var total Stats
			first := 0
			before := be.Stats()
			for b.Loop() {
				st, err := r.Run(context.Background(), first, 2*episodes, func(*EpisodeResult) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				first += 2 * episodes
				total.GeneratedTokens += st.GeneratedTokens
				total.PromptTokens += st.PromptTokens
				total.Turns += st.Turns
				total.Calls += st.Calls
				total.Requests += st.Requests
				total.Wall += st.Wall
			}
			after := be.Stats()
			decodeTime := (after.DecodeTime - before.DecodeTime).Seconds()
			steps := after.Steps - before.Steps
			generated := float64(after.GeneratedTokens - before.GeneratedTokens)
			decoded := float64(after.DecodedTokens - before.DecodedTokens)
			occupancy := generated / float64(steps)
			rate := total.TokensPerSecond()
			// The reference's shape comes from what the backend decoded:
			// per request, genPerReq sampled tokens and promptPerReq prompt
			// tokens (its appended events plus the previous reply's last
			// token, which is decoded with the next prompt; the tokens
			// served from the cache are not decoded and not counted). The
			// raw loop needs whole numbers, and its rate is nearly
			// proportional to generated tokens per prompt token (prefill
			// is most of its time), so the reply length is rounded and the
			// prompt scaled to keep that proportion exact: rounding 6.6
			// tokens up to 7 alone would overstate the reference by 6%.
			reqs := float64(total.Requests)
			genPerReq := generated / reqs
			promptPerReq := (decoded - generated + reqs) / reqs
			genLen := max(2, int(math.Round(genPerReq)))
			promptLen := max(1, int(math.Round(promptPerReq*float64(genLen)/genPerReq)))
			width := max(1, int(math.Round(occupancy)))
			// Same n_batch as the rollout's backend: llama.cpp's cost per
			// prompt token depends on the size of the decode, and one
			// decode of all prompts at once is not what the backend does.
			raw, err := llama.BenchDecodeChunked(context.Background(), o, width, 0, promptLen, genLen)
			if err != nil {
				b.Fatal(err)
			}
			decodeRate := generated / decodeTime
			b.ReportMetric(rate, "tok/s")
			b.ReportMetric(decodeRate, "decode_tok/s")
			b.ReportMetric(rate/decodeRate, "ratio")
			b.ReportMetric(raw.RawRate(), "raw_tok/s")
			b.ReportMetric(rate/raw.RawRate(), "raw_ratio")
			b.ReportMetric(occupancy, "occupancy")
			b.ReportMetric(total.MeanBatch(), "req/call")
			b.ReportMetric(promptPerReq, "prompt/req")
			b.ReportMetric(genPerReq, "gen/req")
			b.ReportMetric(float64(promptLen), "raw_prompt")
			b.ReportMetric(float64(genLen), "raw_gen")
		})
	}
}
