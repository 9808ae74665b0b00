package sotopia

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/omar-selfplay/omar/engine"
)

// HistoryFromRecord rebuilds the omniscient history of a recorded episode
// (a record read back from JSONL holds plain JSON values).
func HistoryFromRecord(rec *engine.Record) (History, error) {
	var h History
	if rec.Env != ID {
		return h, fmt.Errorf("sotopia: record of %s, want %s", rec.Env, ID)
	}
	if err := reencode(rec.Scenario, &h.Setup); err != nil {
		return h, fmt.Errorf("sotopia: record scenario: %w", err)
	}
	if err := reencode(rec.Outcome.Terms, &h.Terms); err != nil {
		return h, fmt.Errorf("sotopia: record terms: %w", err)
	}
	if len(h.Setup.Scenario.Agents) != 2 || h.Setup.Characters[0].Name == "" {
		return h, fmt.Errorf("sotopia: record seed %d has no scenario", rec.Seed)
	}
	return h, nil
}

func reencode(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// Rejudge scores a recorded episode with j and replaces its outcome (and
// the outcome event at the end of its log).
func Rejudge(ctx context.Context, j *Judge, rec *engine.Record) error {
	h, err := HistoryFromRecord(rec)
	if err != nil {
		return err
	}
	out, _, err := j.Score(ctx, h)
	if err != nil {
		return err
	}
	rec.Outcome = out
	for i := range rec.Events {
		if rec.Events[i].Kind == engine.KindOutcome {
			rec.Events[i].Data = out
			rec.Events[i].Text = "The episode is over: " + out.Result
		}
	}
	return nil
}
