package recipes

import (
	"slices"
	"strings"
	"testing"
)

// plannedEnvs lists a plan as env or env:sft.
func plannedEnvs(plan []CascadeStage) []string {
	var out []string
	for _, s := range plan {
		name := s.Env
		if s.Kind == StageSFT {
			name += ":sft"
		}
		out = append(out, name)
	}
	return out
}

func TestCascadeStagePlan(t *testing.T) {
	transfer := TransferAwareOrder()
	anti := slices.Clone(transfer)
	slices.Reverse(anti)
	cases := []struct {
		name string
		edit func(o *CascadeOptions)
		want []string
	}{
		{"default: transfer_aware", func(o *CascadeOptions) {}, transfer},
		{"transfer_aware", func(o *CascadeOptions) { o.Order = OrderTransferAware }, transfer},
		{"anti_transfer", func(o *CascadeOptions) { o.Order = OrderAntiTransfer }, anti},
		{"sft: craigslist first, marketplace before its PPO", func(o *CascadeOptions) { o.SFT = true },
			[]string{"craigslist:sft", "calendar", "casino", "dealornodeal", "craigslist", "marketplace:sft", "marketplace", "jobinterview"}},
		{"anti_transfer with sft", func(o *CascadeOptions) { o.Order, o.SFT = OrderAntiTransfer, true },
			[]string{"craigslist:sft", "jobinterview", "marketplace:sft", "marketplace", "craigslist", "dealornodeal", "casino", "calendar"}},
		{"explicit stages", func(o *CascadeOptions) {
			o.Stages = []CascadeStage{{Env: "casino", Iterations: 1}, {Env: "craigslist", Kind: StageSFT, Iterations: 1, Episodes: 4}}
		}, []string{"casino", "craigslist:sft"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultCascade()
			c.edit(&o)
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			plan := o.StagePlan()
			if got := plannedEnvs(plan); !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if len(o.Stages) > 0 {
				return
			}
			for _, s := range plan {
				want := o.Iterations
				if s.Kind == StageSFT {
					want = o.SFTEpochs
				}
				if s.Iterations != want || s.Params["compact"] != true {
					t.Errorf("stage %+v: want %d iterations and the built-in model's params", s, want)
				}
			}
		})
	}
}

// TestCascadeRandomOrder: random is a permutation of the six games drawn
// from the run's seed: the same for the same seed.
func TestCascadeRandomOrder(t *testing.T) {
	orders := map[string]bool{}
	for seed := range uint64(8) {
		o := DefaultCascade()
		o.Order, o.Run.Rollout.Seed = OrderRandom, seed
		got := plannedEnvs(o.StagePlan())
		if again := plannedEnvs(o.StagePlan()); !slices.Equal(got, again) {
			t.Fatalf("seed %d: %v then %v", seed, got, again)
		}
		sorted := slices.Sorted(slices.Values(got))
		if want := slices.Sorted(slices.Values(TransferAwareOrder())); !slices.Equal(sorted, want) {
			t.Fatalf("seed %d: %v is not a permutation of %v", seed, got, want)
		}
		orders[strings.Join(got, ",")] = true
	}
	if len(orders) < 2 {
		t.Errorf("8 seeds gave one order: %v", orders)
	}
}

func TestCascadeValidate(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(o *CascadeOptions)
	}{
		{"both stages and order", "give either stages or order", func(o *CascadeOptions) {
			o.Order, o.Stages = OrderRandom, []CascadeStage{{Env: "casino", Iterations: 1}}
		}},
		{"unknown order", `order "best"`, func(o *CascadeOptions) { o.Order = "best" }},
		{"unknown selection", `selection "last"`, func(o *CascadeOptions) { o.Selection = "last" }},
		{"unknown kind", `kind "dpo"`, func(o *CascadeOptions) { o.Stages = []CascadeStage{{Env: "casino", Kind: "dpo", Iterations: 1}} }},
		{"sft without episodes", "episodes 0 < 1", func(o *CascadeOptions) {
			o.Stages = []CascadeStage{{Env: "casino", Kind: StageSFT, Iterations: 1}}
		}},
		{"ppo with episodes", "episodes is an sft stage's", func(o *CascadeOptions) {
			o.Stages = []CascadeStage{{Env: "casino", Iterations: 1, Episodes: 3}}
		}},
		{"sft without a strategic script", "sft clones the strategic script", func(o *CascadeOptions) {
			o.Stages = []CascadeStage{{Env: "sealedbid", Kind: StageSFT, Iterations: 1, Episodes: 2}}
		}},
		{"filled iterations", "iterations 0 < 1", func(o *CascadeOptions) { o.Iterations = 0 }},
		{"filled sft epochs", "iterations 0 < 1", func(o *CascadeOptions) { o.SFT, o.SFTEpochs = true, 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultCascade()
			c.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestCascadeTable: the environments of every row, "–" where one was not
// evaluated yet, and the checkpoint each stage started from.
func TestCascadeTable(t *testing.T) {
	rs := []CascadeStageResult{
		{Stage: 1, Env: "craigslist", Kind: StageSFT, Reward: map[string]float64{"craigslist": 0.2}, Mean: 0.2, Best: true, From: "base"},
		{Stage: 2, Env: "casino", Iteration: 1, Partial: true, Reward: map[string]float64{"craigslist": 0.1, "casino": 0.5}, Mean: 0.3, Best: true, From: "stage 1"},
		{Stage: 2, Env: "casino", Iteration: 2, Reward: map[string]float64{"craigslist": 0.1, "casino": 0.3}, Mean: 0.2, From: "stage 1"},
	}
	var b strings.Builder
	CascadeTable(&b, rs)
	want := `| after stage | from | casino | craigslist | mean |
|---|---|---|---|---|
| 1: craigslist (sft) (best) | base | – | 0.200 | 0.200 |
| 2: casino, iteration 1 (best) | stage 1 | 0.500 | 0.100 | 0.300 |
| 2: casino | stage 1 | 0.300 | 0.100 | 0.200 |
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
