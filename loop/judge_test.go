package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/judge/judgetest"
	"github.com/omar-selfplay/omar/sotopia"
)

// TestJudgeStageWeightsOption: the rollout's judge: {stage_weights} picks
// the process reward's weights; without it the judge proposes them.
func TestJudgeStageWeightsOption(t *testing.T) {
	for _, tt := range []struct {
		key, wantSchema string
	}{
		{"", string(sotopia.ProcessSchema(300))},
		{", stage_weights: proposed", string(sotopia.ProcessSchema(300))},
		{", stage_weights: fixed", string(sotopia.FixedProcessSchema(300))},
	} {
		t.Run(tt.key, func(t *testing.T) {
			srv := judgetest.NewOllama(t, false)
			c := RolloutOptions{}.Defaults()
			src := fmt.Sprintf("judge: {ollama: %q, ollama_model: %q, process: true%s}\n", srv.URL, srv.Model, tt.key)
			if err := strictyaml.Decode(strings.NewReader(src), &c); err != nil {
				t.Fatal(err)
			}
			p := &Players{}
			defer p.Close()
			g, err := AttachJudge(sotopia.New(), &c, p, false)
			if err != nil {
				t.Fatal(err)
			}
			cast, _ := engine.ScriptedCast(g, nil, 1)
			rec, err := engine.Play(context.Background(), g, 1, engine.Params{"max_turns": 2}, cast, engine.DefaultOptions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(rec.Outcome.Terms.(sotopia.Terms).Process); n != 2 {
				t.Fatalf("got %d process turns, want 2", n)
			}
			reqs := srv.Requests()
			if last := string(reqs[len(reqs)-1].Format); last != tt.wantSchema {
				t.Errorf("got process schema %.120s…, want %.120s…", last, tt.wantSchema)
			}
		})
	}
	c := RolloutOptions{}.Defaults()
	c.Judge = &JudgeOptions{Policy: true, StageWeights: "learned"}
	if _, err := c.JudgeOptions(); err == nil || !strings.Contains(err.Error(), "want proposed or fixed") {
		t.Errorf("got %v, want stage_weights learned refused", err)
	}
}
