package inference

import (
	"math"
	"strings"
	"testing"
)

func TestSamplingValidate(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		name string
		s    Sampling
		want string // a field the error names; "" for valid
	}{
		{"greedy", Sampling{}, ""},
		{"typical", Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 3}, ""},
		{"bounds", Sampling{Temperature: MaxTemperature, TopP: 1, MinP: 1}, ""},
		{"inf temperature", Sampling{Temperature: inf}, "temperature"},
		{"-inf temperature", Sampling{Temperature: -inf}, "temperature"},
		{"nan temperature", Sampling{Temperature: nan}, "temperature"},
		{"negative temperature", Sampling{Temperature: -1}, "temperature"},
		{"denormal temperature", Sampling{Temperature: 1e-40}, "temperature"},
		{"huge temperature", Sampling{Temperature: 1e30}, "temperature"},
		{"top_p above 1", Sampling{Temperature: 1, TopP: 1.5}, "top_p"},
		{"negative top_p", Sampling{Temperature: 1, TopP: -0.1}, "top_p"},
		{"nan top_p", Sampling{Temperature: 1, TopP: nan}, "top_p"},
		{"min_p above 1", Sampling{Temperature: 1, MinP: 2}, "min_p"},
		{"nan min_p", Sampling{Temperature: 1, MinP: nan}, "min_p"},
		{"negative top_k", Sampling{Temperature: 1, TopK: -1}, "top_k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// FuzzSamplingValidate: Validate accepts exactly the settings inside the
// documented ranges.
func FuzzSamplingValidate(f *testing.F) {
	f.Add(float32(0.7), 40, float32(0.9), float32(0.05))
	f.Add(float32(math.Inf(1)), -1, float32(math.NaN()), float32(2))
	f.Fuzz(func(t *testing.T, temp float32, topK int, topP, minP float32) {
		s := Sampling{Temperature: temp, TopK: topK, TopP: topP, MinP: minP}
		tt := float64(temp)
		ok := (tt == 0 || tt >= MinTemperature && tt <= MaxTemperature) &&
			topK >= 0 && topP >= 0 && topP <= 1 && minP >= 0 && minP <= 1
		if err := s.Validate(); (err == nil) != ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", s, err, ok)
		}
	})
}
