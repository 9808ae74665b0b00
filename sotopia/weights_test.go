package sotopia

import (
	"math"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference/gbnf"
)

// keys names the weights of ProcessDimensions in order, for the tables.
func keys(w ...float64) map[string]float64 {
	out := map[string]float64{}
	for d, v := range w {
		out[ProcessDimensions[d].Key] = v
	}
	return out
}

func TestSanitizeWeights(t *testing.T) {
	def := WeightPolicy{}.Defaults()
	perDim := def
	perDim.Caps = map[string]float64{"goal_advancement": .2, "turn_quality": .05}
	tight := def
	tight.Cap = 1.0 / 6
	early, late := StageWeights[0][:], StageWeights[2][:]
	cascade := WeightPolicy{Cap: .4, Prior: StageWeights}
	tests := []struct {
		name     string
		proposed map[string]float64
		stage    string
		policy   WeightPolicy
		want     []float64
		fellBack bool
	}{
		{"normalised", keys(.4, .4, .4, .4, .2, .2), "mid", def, []float64{.2, .2, .2, .2, .1, .1}, false},
		{"already a distribution", keys(.3, .2, .2, .1, .1, .1), "mid", def, []float64{.3, .2, .2, .1, .1, .1}, false},
		{"unknown keys dropped", func() map[string]float64 {
			m := keys(1, 1, 1, 1, 0, 0)
			m["charisma"], m["GOAL_ADVANCEMENT"] = 5, 5
			return m
		}(), "mid", def, []float64{.25, .25, .25, .25, 0, 0}, false},
		{"missing dimensions weigh 0", map[string]float64{"goal_advancement": 1, "turn_quality": 1}, "late", def, []float64{.5, 0, 0, 0, 0, .5}, false},
		{"negative clipped to 0", keys(-3, 1, 1, 1, 1, 0), "mid", def, []float64{0, .25, .25, .25, .25, 0}, false},
		{"above 1 clipped to 1", keys(7, 1, 1, 1, 0, 0), "mid", def, []float64{.25, .25, .25, .25, 0, 0}, false},
		{"NaN rejects the proposal", keys(math.NaN(), 1, 1, 1, 1, 1), "early", def, early, true},
		{"+Inf rejects the proposal", keys(math.Inf(1), 1, 1, 1, 1, 1), "late", def, late, true},
		{"-Inf rejects the proposal", keys(1, 1, math.Inf(-1), 1, 1, 1), "late", def, late, true},
		{"all zero is the prior", keys(0, 0, 0, 0, 0, 0), "early", def, early, true},
		{"all negative is the prior", keys(-1, -1, -1, -1, -1, -1), "early", def, early, true},
		{"missing is the prior", nil, "late", def, late, true},
		{"only unknown keys is the prior", map[string]float64{"charisma": 1}, "early", def, early, true},
		// .8 → .5; the .3 cut goes to the others in proportion (.1 each → .15)
		{"cap, overflow proportional", keys(.8, .1, .1, 0, 0, 0), "mid", def, []float64{.5, .25, .25, 0, 0, 0}, false},
		// .5 is cut from goal and shared equally by dimensions that weigh nothing
		{"cap, overflow to zero weights", keys(1, 0, 0, 0, 0, 0), "mid", def, []float64{.5, .1, .1, .1, .1, .1}, false},
		// goal .6 → .2 (cut .4), turn_quality .2 → .05 (cut .15); .55 to the
		// other four in proportion to their .05 each
		{"per-dimension caps", keys(.6, .05, .05, .05, .05, .2), "mid", perDim, []float64{.2, .1875, .1875, .1875, .1875, .05}, false},
		// goal .6 → .4; its .2 pushes strategic .3 to .45 > .4, whose .05
		// goes to relational in a second round
		{"cascading caps", keys(.6, .3, .1, 0, 0, 0), "mid", cascade, []float64{.4, .4, .2, 0, 0, 0}, false},
		{"caps adding up to 1", keys(1, 0, 0, 0, 0, 0), "mid", tight, []float64{1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6}, false},
		// early prior .10 .10 .30 .15 .20 .15: turn_quality cut to .05, the
		// .10 cut shared by the other five in proportion (.85 in all)
		{"caps apply to the prior", nil, "early", perDim, scale([]float64{.1, .1, .3, .15, .2, 0}, 1+.10/.85, .05), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, fellBack, err := SanitizeWeights(tt.proposed, tt.stage, tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			if fellBack != tt.fellBack {
				t.Errorf("got fell back %v, want %v", fellBack, tt.fellBack)
			}
			total := 0.0
			for d := range got {
				total += got[d]
				if math.Abs(got[d]-tt.want[d]) > 1e-12 {
					t.Errorf("got weights %v, want %v", got, tt.want)
					break
				}
			}
			if math.Abs(total-1) > 1e-12 {
				t.Errorf("got weights adding up to %.17g, want 1", total)
			}
		})
	}
}

func TestSanitizeWeightsErrors(t *testing.T) {
	def := WeightPolicy{}.Defaults()
	tests := []struct {
		name    string
		stage   string
		policy  func(*WeightPolicy)
		wantErr string
	}{
		{"unknown stage", "middle", func(*WeightPolicy) {}, "want one of"},
		{"caps below 1 in all", "mid", func(p *WeightPolicy) { p.Cap = .1 }, "add up to"},
		{"zero cap", "mid", func(p *WeightPolicy) { p.Caps = map[string]float64{"turn_quality": 0} }, "want 0 < cap"},
		{"NaN cap", "mid", func(p *WeightPolicy) { p.Cap = math.NaN() }, "want 0 < cap"},
		{"unknown capped dimension", "mid", func(p *WeightPolicy) { p.Caps = map[string]float64{"charisma": .5} }, "unknown process dimension"},
		{"negative prior", "mid", func(p *WeightPolicy) { p.Prior[1][0] = -.1 }, "prior weight"},
		{"zero prior", "mid", func(p *WeightPolicy) { p.Prior[2] = [6]float64{} }, "all zero"},
		{"prior pass rate", "mid", func(p *WeightPolicy) { p.PriorPassRate = 1.5 }, "prior pass rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := def
			tt.policy(&p)
			_, _, err := SanitizeWeights(keys(1, 1, 1, 1, 1, 1), tt.stage, p)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// scale multiplies w by f and sets its last weight to last.
func scale(w []float64, f, last float64) []float64 {
	for d := range w {
		w[d] *= f
	}
	w[len(w)-1] = last
	return w
}

// FuzzSanitizeWeights: whatever the proposal and caps, the weights are
// non-negative, add up to 1 and respect the caps (Validate refuses caps
// that cannot be met).
func FuzzSanitizeWeights(f *testing.F) {
	f.Add(.3, .2, .2, .1, .1, .1, .5, .5, uint8(1))
	f.Add(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, .5, .2, uint8(0))
	f.Add(math.NaN(), 1.0, 1.0, 1.0, 1.0, 1.0, .5, .5, uint8(2))
	f.Add(-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, .2, 1.0, uint8(0))
	f.Add(1e308, 1e-308, 5e-324, 0.0, 0.0, 0.0, 1.0/6, 1.0/6, uint8(1))
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g, cap, goalCap float64, stage uint8) {
		p := WeightPolicy{}.Defaults()
		p.Cap, p.Caps = cap, map[string]float64{"goal_advancement": goalCap}
		w, _, err := SanitizeWeights(keys(a, b, c, d, e, g), Stages[int(stage)%len(Stages)], p)
		if err != nil {
			if p.Validate() == nil {
				t.Fatalf("valid policy refused: %v", err)
			}
			return
		}
		caps := p.caps()
		total := 0.0
		for i, v := range w {
			if !(v >= 0) || v > caps[i]+1e-12 {
				t.Fatalf("got weights %v, want each in [0, cap %v]", w, caps)
			}
			total += v
		}
		if math.Abs(total-1) > 1e-12 {
			t.Fatalf("got weights %v adding up to %.17g, want 1", w, total)
		}
	})
}

// TestProcessGrammarsCheck: both process grammars parse and stay within
// llama.cpp's limits.
func TestProcessGrammarsCheck(t *testing.T) {
	for name, g := range map[string]string{"proposed": ProcessGrammar(300), "fixed": FixedProcessGrammar(300)} {
		if _, err := gbnf.Check(g, "root", gbnf.Limits{}.Defaults()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
