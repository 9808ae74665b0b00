package selfplay

import (
	"context"
	"fmt"
	"math"
	"os"
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
// loop (llama.BenchDecode) at the batch size the rollout actually reached
// and the same prompt and reply lengths per turn:
//
//	tok/s      generated tokens per second of the runner (prefill included)
//	raw_tok/s  the raw loop's generated tokens per second at that shape
//	ratio      tok/s ÷ raw_tok/s (target ≥ 0.9)
//	occupancy  sequences sampled per llama_decode step in the rollout
//	calls/req  requests per Generate call of the aggregator
//
// go test -run '^$' -bench Rollout -benchtime 3x ./selfplay
func BenchmarkRollout(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(path, model.Options{}.Defaults()); err != nil {
		b.Fatal(err)
	}
	lib := llamacpp.DefaultLibDir(os.Getenv("OMAR_LLAMA_LIB"))
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
			steps := after.Steps - before.Steps
			occupancy := float64(after.GeneratedTokens-before.GeneratedTokens) / float64(steps)
			rate := total.TokensPerSecond()
			promptPerTurn := max(1, int(math.Round(float64(total.PromptTokens)/float64(total.Turns))))
			genPerTurn := max(2, int(math.Round(float64(total.GeneratedTokens)/float64(total.Turns))))
			width := max(1, int(math.Round(occupancy)))
			raw, err := llama.BenchDecode(context.Background(), o, width, promptPerTurn, genPerTurn)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rate, "tok/s")
			b.ReportMetric(raw.RawRate(), "raw_tok/s")
			b.ReportMetric(rate/raw.RawRate(), "ratio")
			b.ReportMetric(occupancy, "occupancy")
			b.ReportMetric(total.MeanBatch(), "req/call")
			b.ReportMetric(float64(promptPerTurn), "prompt/turn")
			b.ReportMetric(float64(genPerTurn), "gen/turn")
		})
	}
}
