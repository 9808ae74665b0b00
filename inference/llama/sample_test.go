package llama

import (
	"bytes"
	"math"
	"testing"
)

func TestHasStop(t *testing.T) {
	tests := []struct {
		text  string
		prev  int
		stops []string
		want  bool
	}{
		{"hello world", 6, []string{"world"}, true},
		{"hello world", 11, []string{"world"}, false}, // already checked before
		{"hello wor", 6, []string{"world"}, false},
		{"abc\n\n", 4, []string{"\n\n"}, true}, // straddles the previous end
		{"abc", 0, []string{""}, false},
		{"", 0, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := hasStop([]byte(tt.text), tt.prev, tt.stops); got != tt.want {
				t.Errorf("hasStop(%q, %d, %q): got %v, want %v", tt.text, tt.prev, tt.stops, got, tt.want)
			}
		})
	}
}

func TestDraw(t *testing.T) {
	logits := []float32{0, float32(math.Log(3)), float32(math.Inf(-1)), 0}
	exps := make([]float64, len(logits))
	m, s := maxSumExp(logits, 1, exps)
	if math.Abs(m+math.Log(s)-math.Log(5)) > 1e-6 { // float32 logits
		t.Fatalf("log-sum-exp: got %v, want %v", m+math.Log(s), math.Log(5))
	}
	tests := []struct {
		u    float64
		want int
	}{{0, 0}, {0.19, 0}, {0.21, 1}, {0.79, 1}, {0.81, 3}, {0.999999, 3}}
	for _, tt := range tests {
		if got := draw(exps, s, tt.u); got != tt.want {
			t.Errorf("draw(u=%v): got %d, want %d", tt.u, got, tt.want)
		}
	}
	// Temperature 0.5 squares the odds.
	m, s = maxSumExp(logits, 2, exps)
	if got := float64(logits[1])*2 - m - math.Log(s); math.Abs(got-math.Log(9.0/11)) > 1e-6 {
		t.Errorf("tempered logprob: got %v, want %v", got, math.Log(9.0/11))
	}
	// Everything masked: no mass.
	if _, s := maxSumExp([]float32{float32(math.Inf(-1))}, 1, exps); s != 0 {
		t.Errorf("all masked: sum %v, want 0", s)
	}
}

func TestExpNonPos(t *testing.T) {
	for _, x := range []float64{0, -1e-12, -0.1, -0.5, -0.693, -1, -2.5, -10, -50.3, -100, -700, -707.9} {
		want := math.Exp(x)
		if got := expNonPos(x); math.Abs(got-want) > 1e-9*want {
			t.Errorf("expNonPos(%v): got %v, want %v", x, got, want)
		}
	}
	for _, x := range []float64{-709, -1e6, math.Inf(-1)} {
		if got := expNonPos(x); got != 0 {
			t.Errorf("expNonPos(%v): got %v, want 0", x, got)
		}
	}
}

func BenchmarkMaxSumExp(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%97) / 10
	}
	exps := make([]float64, len(x))
	b.ReportAllocs()
	for b.Loop() {
		maxSumExp(x, 1, exps)
	}
}

// FuzzHasStop: checking only the bytes added since the last piece finds a
// stop string at the same piece as searching the whole text each time.
func FuzzHasStop(f *testing.F) {
	f.Add("hello world", "world", uint8(3))
	f.Add("abc\n\nd", "\n\n", uint8(1))
	f.Add("aaaa", "aa", uint8(2))
	f.Fuzz(func(t *testing.T, text, stop string, step uint8) {
		n := int(step%7) + 1
		var buf []byte
		incremental, naive := -1, -1
		for i := 0; i < len(text); i += n {
			prev := len(buf)
			buf = append(buf, text[i:min(i+n, len(text))]...)
			if incremental < 0 && hasStop(buf, prev, []string{stop}) {
				incremental = i
			}
			if naive < 0 && stop != "" && bytes.Contains(buf, []byte(stop)) {
				naive = i
			}
		}
		if incremental != naive {
			t.Errorf("text %q stop %q pieces of %d: incremental found it at %d, whole-text search at %d", text, stop, n, incremental, naive)
		}
	})
}
