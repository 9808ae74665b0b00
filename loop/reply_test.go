package loop

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/sotopia"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/selfplay"
)

// TestReplyReachesEveryPlay guards the one reply-settings struct: every
// field of selfplay.Reply set in a run's rollout section must reach its
// rollouts and its held-out evaluations unchanged (a field copied by
// hand elsewhere once fell back to its default there: max_legal). Each
// field is set to a value unlike its default in turn.
func TestReplyReachesEveryPlay(t *testing.T) {
	odd := selfplay.Reply{
		MaxTokens: 40, Context: 4096, MinReplyTokens: 12,
		Sampling: inference.Sampling{Temperature: 0.5, TopK: 7, TopP: 0.9, MinP: 0.05},
		Grammar:  false, MaxLegal: -1, Trace: selfplay.TraceToM,
		ChatTemplate: "{{ messages[0].content }}", Thinking: "budget 8", ThinkingLoss: selfplay.ThinkingMask,
		ThinkingHistory: selfplay.HistoryStream,
	}
	oddV := reflect.ValueOf(odd)
	typ := oddV.Type()
	for f := range typ.NumField() {
		name := typ.Field(f).Name
		t.Run(name, func(t *testing.T) {
			ro := RolloutOptions{}.Defaults()
			reflect.ValueOf(&ro.Reply).Elem().Field(f).Set(oddV.Field(f))
			if name == "ThinkingLoss" || name == "ThinkingHistory" {
				ro.Thinking = selfplay.ThinkingOn // they are refused without a thinking mode
			}
			if reflect.DeepEqual(ro.Reply, RolloutOptions{}.Defaults().Reply) {
				t.Fatalf("%s: the odd value equals the default; the test cannot see it", name)
			}
			want := ro.Reply
			runner, err := ro.RunnerOptions(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(runner.Reply, want) {
				t.Errorf("rollouts: got %+v, want %+v", runner.Reply, want)
			}
			if got := ro.ArenaOptions(ro.Context).Reply; !reflect.DeepEqual(got, want) {
				t.Errorf("evaluations: got %+v, want %+v", got, want)
			}
		})
	}
}

// TestSotopiaRunNeedsJudge: a training run on SOTOPIA without a judge is
// refused, naming the three ways to give it one; a rollout (data
// generation) may still play unjudged.
func TestSotopiaRunNeedsJudge(t *testing.T) {
	c := RolloutOptions{}.Defaults()
	c.Env = "sotopia"
	_, err := AttachJudge(sotopia.New(), &c, nil, true)
	if !errors.Is(err, ErrNoJudge) {
		t.Fatalf("training without a judge: got %v, want ErrNoJudge", err)
	}
	for _, way := range []string{"model:", "ollama_model:", "policy: true"} {
		if !strings.Contains(err.Error(), way) {
			t.Errorf("the refusal %q does not name %q", err, way)
		}
	}
	if g, err := AttachJudge(sotopia.New(), &c, nil, false); err != nil || g == nil {
		t.Errorf("a rollout without a judge: got %v, %v; want the game back", g, err)
	}
	if _, err := AttachJudge(engine.Game(nil), &c, nil, true); err != nil {
		t.Errorf("a game that takes no judge: %v", err)
	}
}
