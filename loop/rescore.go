package loop

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/judge"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/sotopia"
)

// RescoreOptions are `omar judge`: recorded SOTOPIA episodes scored again
// by an LLM judge and written back with the new outcome.
type RescoreOptions struct {
	// Judge names the judge; Rollout gives a GGUF judge its library,
	// threads and GPU layers.
	Judge   JudgeOptions
	Rollout RolloutOptions
	// Parallel episodes are judged at once (one batched backend).
	Parallel int
	// Sotopia tunes the judge (seed, retries, label: empty is the judge's
	// own name, "llama:<file>" or "ollama:<model>").
	Sotopia sotopia.JudgeOptions
	// KeepContext keeps Judge.Context as given; otherwise a GGUF judge
	// trained on fewer positions gets its training context (the llama
	// backend refuses a longer one), said on Log.
	KeepContext bool
	Log         io.Writer
}

// OllamaHost is an Ollama server URL: h, else Ollama's default. A bare
// host:port (as $OLLAMA_HOST often is) gets http://.
func OllamaHost(h string) string {
	if h == "" {
		return ollama.DefaultHost
	}
	if !strings.Contains(h, "://") {
		h = "http://" + h
	}
	return h
}

// Rescore judges the SOTOPIA records of the files at paths and writes
// every record (others unchanged) to w. start is told how many will be
// judged, done after each; either may be nil.
func Rescore(ctx context.Context, o RescoreOptions, paths []string, w io.Writer, start func(total int), done func()) (judge.Summary, error) {
	if err := o.Judge.Validate(); err != nil {
		return judge.Summary{}, err
	}
	recs, err := engine.LoadRecords(func(err error) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "warning: %v\n", err)
		}
	}, paths...)
	if err != nil {
		return judge.Summary{}, err
	}
	jc := o.Judge
	if jc.OllamaModel != "" {
		jc.Ollama = OllamaHost(jc.Ollama)
	}
	if jc.Model != "" && !o.KeepContext {
		if n := model.TrainingContext(jc.Model); n > 0 && n < jc.Context {
			if o.Log != nil {
				fmt.Fprintf(o.Log, "judge context: %d tokens, the training context of %s (--context sets another)\n", n, filepath.Base(jc.Model))
			}
			jc.Context = n
		}
	}
	comp, label, closer, err := o.Rollout.OpenJudge(jc, o.Parallel, nil, "")
	if err != nil {
		return judge.Summary{}, err
	}
	defer closer.Close()
	so := o.Sotopia
	if so.Label == "" {
		so.Label = label
	}
	j, err := sotopia.NewJudge(comp, so)
	if err != nil {
		return judge.Summary{}, err
	}
	if start != nil {
		start(judge.Count(recs, sotopia.ID))
	}
	if done == nil {
		done = func() {}
	}
	return judge.Rescore(ctx, j, recs, o.Parallel, w, done)
}
