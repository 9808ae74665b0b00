package selfplay

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
)

// ids tokenises s one byte per token (as the test tokenizer does).
func ids(s string) []int32 {
	out := make([]int32, len(s))
	for i := range len(s) {
		out[i] = int32(s[i])
	}
	return out
}

// replyTurn is a sound turn replying text to a short prompt.
func replyTurn(text string) GuardTurn {
	return GuardTurn{
		Env: "e", Seat: engine.Seat{Index: 0, Role: "buyer"}, Notification: engine.Notification{ID: "n1"},
		Prompt: ids("<s>user: Your offer? The listing price is 100.\nassistant: "),
		Reply:  ids(text), Text: text, Stop: inference.StopEOG, MaxTokens: 48,
	}
}

func TestRuleGuard(t *testing.T) {
	long := "I would really like to buy this lovely old bicycle for a fair price"
	tests := []struct {
		name string
		turn func() GuardTurn
		o    func(*GuardOptions)
		want []string
	}{
		{name: "sound", turn: func() GuardTurn { return replyTurn("OFFER 80") }},
		{name: "sound sentence", turn: func() GuardTurn { return replyTurn("I can pay 80, and I will pick it up today.") }},
		{name: "empty", turn: func() GuardTurn { return replyTurn("") }, want: []string{FlagEmpty}},
		{name: "white space", turn: func() GuardTurn { return replyTurn(" \n\t ") }, want: []string{FlagEmpty}},
		{name: "empty off", turn: func() GuardTurn { return replyTurn("") }, o: func(o *GuardOptions) { o.Empty = false }},
		{
			name: "invalid", want: []string{FlagInvalid},
			turn: func() GuardTurn { g := replyTurn("I pass."); g.Rejection = "unknown move"; return g },
		},
		{
			name: "invalid and defaulted", want: []string{FlagInvalid, FlagDefaulted},
			turn: func() GuardTurn {
				g := replyTurn("I pass.")
				g.Rejection, g.Defaulted = "unknown move", true
				return g
			},
		},
		{
			name: "invalid off", o: func(o *GuardOptions) { o.Invalid, o.Defaulted = false, false },
			turn: func() GuardTurn {
				g := replyTurn("I pass.")
				g.Rejection, g.Defaulted = "unknown move", true
				return g
			},
		},
		{
			// 2 + 3·6 = 20 tokens, "ha " covers 18 of them: 90%.
			name: "repeated 3-gram", want: []string{FlagRepetition},
			turn: func() GuardTurn { return replyTurn("ok" + strings.Repeat("ha ", 6)) },
		},
		{
			// One token: 9 of 10.
			name: "repeated token", want: []string{FlagRepetition},
			turn: func() GuardTurn { return replyTurn("!!!!!!!!!X") },
		},
		{
			// 6 of 10 tokens is 60%, not more than 60%.
			name: "coverage at the threshold", turn: func() GuardTurn { return replyTurn("!!!!!!abcd") },
		},
		{
			// "abc" twice covers 6 of 8 but occurs only twice.
			name: "too few occurrences", turn: func() GuardTurn { return replyTurn("abcabcXY") },
		},
		{
			// Seven tokens, all the same: shorter than repeat_min_tokens.
			name: "short reply", turn: func() GuardTurn { return replyTurn("aaaaaaa") },
		},
		{
			name: "repetition off", o: func(o *GuardOptions) { o.RepeatMinTokens = 0 },
			turn: func() GuardTurn { return replyTurn(strings.Repeat("ha ", 6)) },
		},
		{
			name: "copied span", want: []string{FlagCopy},
			turn: func() GuardTurn {
				g := replyTurn("Sure: " + long + "!")
				g.Prompt = append(g.Prompt, ids("seller said: "+long+"\n")...)
				return g
			},
		},
		{
			// 31 tokens of the prompt are copied; the threshold is 32.
			name: "copy below the threshold",
			turn: func() GuardTurn {
				g := replyTurn("Sure!" + long[:31] + "!")
				g.Prompt = append(g.Prompt, ids("seller said: "+long+"\n")...)
				return g
			},
		},
		{
			name: "copy of a short span with a lower threshold", want: []string{FlagCopy},
			o:    func(o *GuardOptions) { o.CopyMinTokens = 8 },
			turn: func() GuardTurn { return replyTurn("The listing price is 100") },
		},
		{
			name: "truncated", want: []string{FlagTruncated},
			turn: func() GuardTurn { g := replyTurn("OFFER 8"); g.Stop = inference.StopLength; return g },
		},
		{
			name: "context full", want: []string{FlagTruncated},
			turn: func() GuardTurn { g := replyTurn("OFFER 8"); g.Stop = inference.StopFull; return g },
		},
		{
			name: "stop string is not truncation",
			turn: func() GuardTurn { g := replyTurn("OFFER 8"); g.Stop = inference.StopString; return g },
		},
		{
			name: "truncated loop", want: []string{FlagRepetition, FlagTruncated},
			turn: func() GuardTurn {
				g := replyTurn(strings.Repeat("ah ", 15) + "a")
				g.Stop = inference.StopLength
				return g
			},
		},
		{
			name: "empty and truncated", want: []string{FlagEmpty, FlagTruncated},
			turn: func() GuardTurn { g := replyTurn("   "); g.Stop = inference.StopLength; return g },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := GuardOptions{}.Defaults()
			if tt.o != nil {
				tt.o(&o)
			}
			g, err := NewRuleGuard(o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Check(context.Background(), tt.turn())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRepeatCoverage(t *testing.T) {
	tests := []struct {
		reply    string
		maxN     int
		minCount int
		want     float64
	}{
		{"", 3, 3, 0},
		{"abcdefgh", 3, 2, 0},
		{"aaaa", 1, 3, 1},
		{"aaaa", 3, 3, 1},         // overlapping occurrences of "aa" count once
		{"abababx", 2, 3, 6. / 7}, // "ab" at 0, 2, 4
		{"abababx", 1, 3, 3. / 7}, // "a" or "b" alone
		{"xyzxyzxyz", 3, 3, 1},
		{"xyzxyzxyz", 2, 3, 6. / 9}, // "xy" three times
	}
	for _, tt := range tests {
		t.Run(tt.reply, func(t *testing.T) {
			if got := repeatCoverage(ids(tt.reply), tt.maxN, tt.minCount); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGuardOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*GuardOptions)
		ok   bool
	}{
		{"defaults", func(*GuardOptions) {}, true},
		{"repetition off ignores its other thresholds", func(o *GuardOptions) { o.RepeatMinTokens, o.RepeatCoverage, o.RepeatMaxN = 0, 5, 0 }, true},
		{"coverage 1", func(o *GuardOptions) { o.RepeatCoverage = 1 }, false},
		{"coverage 0", func(o *GuardOptions) { o.RepeatCoverage = 0 }, false},
		{"coverage NaN", func(o *GuardOptions) { o.RepeatCoverage = math.NaN() }, false},
		{"max n 0", func(o *GuardOptions) { o.RepeatMaxN = 0 }, false},
		{"min count 1", func(o *GuardOptions) { o.RepeatMinCount = 1 }, false},
		{"negative copy", func(o *GuardOptions) { o.CopyMinTokens = -1 }, false},
		{"negative min tokens", func(o *GuardOptions) { o.RepeatMinTokens = -1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := GuardOptions{}.Defaults()
			tt.mod(&o)
			if err := o.Validate(); (err == nil) != tt.ok {
				t.Errorf("got error %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// FuzzRuleGuard: the guard never panics, flags only with known, non-empty
// reasons, each at most once, and flags what a rule says by itself.
func FuzzRuleGuard(f *testing.F) {
	for _, s := range []string{"", "OFFER 80", " \n", "okha ha ha ha ha ha ", "!!!!!!!!!X", "abcabcXY"} {
		f.Add([]byte(s), []byte("<s>user: Your offer?\nassistant: "), uint8(0), uint8(8), false, false)
	}
	f.Add([]byte("The listing price is 100"), []byte("The listing price is 100"), uint8(1), uint8(4), true, true)
	known := []string{FlagEmpty, FlagInvalid, FlagDefaulted, FlagRepetition, FlagCopy, FlagTruncated}
	f.Fuzz(func(t *testing.T, reply, prompt []byte, stop, copyMin uint8, rejected, defaulted bool) {
		o := GuardOptions{}.Defaults()
		o.CopyMinTokens = int(copyMin % 40)
		g, err := NewRuleGuard(o)
		if err != nil {
			t.Fatal(err)
		}
		// Wider token ids than bytes: pairs of bytes.
		toks := func(b []byte) []int32 {
			out := make([]int32, 0, len(b)/2)
			for len(b) >= 2 {
				out = append(out, int32(binary.LittleEndian.Uint16(b)))
				b = b[2:]
			}
			return out
		}
		turn := GuardTurn{
			Prompt: toks(prompt), Reply: toks(reply), Text: string(reply),
			Stop:      []inference.StopReason{inference.StopEOG, inference.StopString, inference.StopLength, inference.StopFull}[stop%4],
			MaxTokens: 48, Defaulted: defaulted,
		}
		if rejected {
			turn.Rejection = "bad"
		}
		got, err := g.Check(context.Background(), turn)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			if !slices.Contains(known, r) || slices.Contains(got[:i], r) {
				t.Fatalf("reasons %q: %q unknown or repeated", got, r)
			}
		}
		if want := rejected; slices.Contains(got, FlagInvalid) != want {
			t.Errorf("invalid flagged %v, want %v", !want, want)
		}
		if want := stop%4 >= 2; slices.Contains(got, FlagTruncated) != want {
			t.Errorf("truncated flagged %v, want %v", !want, want)
		}
		if want := strings.TrimSpace(string(reply)) == ""; slices.Contains(got, FlagEmpty) != want {
			t.Errorf("empty flagged %v, want %v", !want, want)
		}
	})
}

// BenchmarkRuleGuard checks one 40-token reply against a 2048-token
// prompt (the copy rule dominates: it hashes every window of the prompt).
func BenchmarkRuleGuard(b *testing.B) {
	g, err := NewRuleGuard(GuardOptions{}.Defaults())
	if err != nil {
		b.Fatal(err)
	}
	turn := replyTurn("OFFER 120 because the bicycle is old and rusty, sorry")
	turn.Prompt = make([]int32, 2048)
	for i := range turn.Prompt {
		turn.Prompt[i] = int32(i * 7919 % 32000)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := g.Check(ctx, turn); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCopiesSpanNaive compares the rolling-hash search with the plain
// double loop on random token strings over small alphabets (many matches
// and near-matches).
func TestCopiesSpanNaive(t *testing.T) {
	naive := func(prompt, reply []int32, n int) bool {
		for i := 0; i+n <= len(reply); i++ {
			for j := 0; j+n <= len(prompt); j++ {
				if slices.Equal(reply[i:i+n], prompt[j:j+n]) {
					return true
				}
			}
		}
		return false
	}
	rng := rand.New(rand.NewPCG(1, 2))
	matches := 0
	for iter := range 2000 {
		alpha := 2 + rng.IntN(3)
		gen := func(n int) []int32 {
			s := make([]int32, n)
			for i := range s {
				s[i] = int32(rng.IntN(alpha)) - 1 // -1 too: negative ids must not break the hash
			}
			return s
		}
		prompt, reply, n := gen(rng.IntN(40)), gen(rng.IntN(20)), 1+rng.IntN(8)
		want := naive(prompt, reply, n)
		if got := copiesSpan(prompt, reply, n); got != want {
			t.Fatalf("case %d: prompt %v reply %v n %d: got %v, want %v", iter, prompt, reply, n, got, want)
		}
		if want {
			matches++
		}
	}
	if matches < 200 || matches > 1800 {
		t.Errorf("%d of 2000 cases match: the cases do not test both answers", matches)
	}
}
