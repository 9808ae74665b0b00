package judge

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/sotopia"
)

// Summary counts what a rescoring did.
type Summary struct {
	Episodes, Judged, Invalid, Skipped int
	// Reward and Goal are sums over the judged episodes, per agent.
	Reward, Goal [2]float64
}

func (s Summary) String() string {
	out := fmt.Sprintf("judged %d of %d episodes (%d invalid judgements, %d other environments copied)", s.Judged, s.Episodes, s.Invalid, s.Skipped)
	if s.Judged > 0 {
		n := float64(s.Judged)
		out += fmt.Sprintf("; mean reward %.3f / %.3f, mean goal %.2f / %.2f (agent_1 / agent_2)", s.Reward[0]/n, s.Reward[1]/n, s.Goal[0]/n, s.Goal[1]/n)
	}
	return out
}

// Rescore judges the SOTOPIA records again with j, up to parallel episodes
// in flight (a batching backend merges their completions), and writes
// every record, in input order, to w; records of other environments are
// copied unchanged. done, when not nil, is called (concurrently) after
// each judged episode.
func Rescore(ctx context.Context, j *sotopia.Judge, recs []*engine.Record, parallel int, w io.Writer, done func()) (Summary, error) {
	var sum Summary
	errs := make([]error, len(recs))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, rec := range recs {
		if rec.Env != sotopia.ID {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = sotopia.Rejudge(ctx, j, rec)
			if done != nil {
				done()
			}
		})
	}
	wg.Wait()
	out := jsonl.NewWriter(w)
	for i, rec := range recs {
		sum.Episodes++
		if errs[i] != nil {
			return sum, fmt.Errorf("episode %d (seed %d): %w", i+1, rec.Seed, errs[i])
		}
		switch {
		case rec.Env != sotopia.ID:
			sum.Skipped++
		case rec.Outcome.Result == "judged":
			sum.Judged++
			for a := range 2 {
				sum.Reward[a] += rec.Outcome.Rewards[a]
				sum.Goal[a] += rec.Outcome.Metrics[fmt.Sprintf("agent_%d/goal", a+1)]
			}
		default:
			sum.Invalid++
		}
		if err := out.Write(rec); err != nil {
			return sum, err
		}
	}
	return sum, out.Flush()
}

// Count is the number of records of env.
func Count(recs []*engine.Record, env string) int {
	n := 0
	for _, r := range recs {
		if r.Env == env {
			n++
		}
	}
	return n
}
