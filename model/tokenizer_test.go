package model

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestPreSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"I'm here, they're not!", []string{"I", "'m", " here", ",", " they", "'re", " not", "!"}},
		{"price 120.50 dollars", []string{"price", " 120", ".", "50", " dollars"}},
		{"a  b", []string{"a", " ", " b"}},
		{"end   ", []string{"end", "   "}},
		{"line\nnext", []string{"line", "\n", "next"}},
		{"x\n\n  y", []string{"x", "\n\n ", " y"}},
		{`{"vote": "Carol"}`, []string{`{"`, "vote", `":`, ` "`, "Carol", `"}`}},
		{"café 42€", []string{"café", " 42", "€"}},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := preSplit(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func tinyTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := NewModelTokenizer(512)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var roundTripCases = []string{
	"Hello, world!",
	"The buyer offered 180 dollars for the blue bicycle.",
	"VOTE: Carol",
	`{"action": "propose", "offer": {"books": 2}}`,
	"  leading spaces and trailing  ",
	"tabs\tand\nnewlines\r\n",
	"ünïcödé — 日本語 🙂",
	"<|im_start|>user\nHi<|im_end|>\n",
	"\xff\xfe invalid utf-8",
	"",
}

func TestTokenizerRoundTrip(t *testing.T) {
	tok := tinyTokenizer(t)
	for _, s := range roundTripCases {
		for _, special := range []bool{false, true} {
			ids := tok.Encode(s, special)
			got, err := tok.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			if got != s {
				t.Errorf("Encode(%q, %v) → %v → %q", s, special, ids, got)
			}
		}
	}
}

func TestTokenizerSpecial(t *testing.T) {
	tok := tinyTokenizer(t)
	text := "<|im_start|>user\nHello<|im_end|>\n"
	ids := tok.Encode(text, true)
	if ids[0] != tok.ID(IMStart) || !slices.Contains(ids, tok.ID(IMEnd)) {
		t.Errorf("parseSpecial: got %v, want <|im_start|> (%d) first and <|im_end|> (%d) inside", ids, tok.ID(IMStart), tok.ID(IMEnd))
	}
	for _, id := range tok.Encode(text, false) {
		if tok.IsControl(id) {
			t.Errorf("without parseSpecial got control token %d", id)
		}
	}
	// Merges compress ordinary English.
	plain := "The market opens before the sun has cleared the hills."
	if n := len(tok.Encode(plain, false)); n >= len(plain)*3/4 {
		t.Errorf("%d tokens for %d bytes: merges are not applied", n, len(plain))
	}
	if _, err := tok.Decode([]int32{5000}); err == nil {
		t.Error("Decode of an id outside the vocabulary: got nil error")
	}
}

func TestTrainBPE(t *testing.T) {
	merges, err := TrainBPE("low lower lowest low low", 260)
	if err != nil {
		t.Fatal(err)
	}
	// "lo"+"w" and " lo" appear most; ties go to the older tokens.
	if got := len(BPEVocab(merges)); got != 260 {
		t.Errorf("vocab: got %d, want 260", got)
	}
	if merges[0] != "l o" {
		t.Errorf("first merge: got %q, want \"l o\"", merges[0])
	}
	if _, err := TrainBPE("ab", 300); err == nil {
		t.Error("corpus too small: got nil error")
	}
	if _, err := TrainBPE("ab", 100); err == nil {
		t.Error("vocab below 256: got nil error")
	}
}

func TestTokenizerFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f := openGGUF(t, path)
	fromFile, err := TokenizerFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	built := tinyTokenizer(t)
	for _, s := range roundTripCases {
		if a, b := fromFile.Encode(s, true), built.Encode(s, true); !slices.Equal(a, b) {
			t.Errorf("%q: from file %v, built %v", s, a, b)
		}
	}
	if fromFile.BOS != built.BOS || fromFile.EOS != built.EOS || fromFile.EOT != built.EOT || fromFile.PAD != built.PAD {
		t.Errorf("special ids: file %d/%d/%d/%d, built %d/%d/%d/%d", fromFile.BOS, fromFile.EOS, fromFile.EOT, fromFile.PAD,
			built.BOS, built.EOS, built.EOT, built.PAD)
	}
}

func FuzzTokenizerRoundTrip(f *testing.F) {
	for _, s := range roundTripCases {
		f.Add(s, true)
		f.Add(s, false)
	}
	tok := tinyTokenizer(f)
	f.Fuzz(func(t *testing.T, s string, special bool) {
		ids := tok.Encode(s, special)
		got, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if got != s {
			t.Errorf("Encode(%q) → %v → %q", s, ids, got)
		}
		if !special {
			for _, id := range ids {
				if tok.IsControl(id) {
					t.Errorf("control token %d without parseSpecial", id)
				}
			}
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	tok := tinyTokenizer(b)
	text := Corpus()[:4096]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, false)
	}
}

func TestTrainBPESplitDigits(t *testing.T) {
	corpus := strings.Repeat("price=120 and price=120, then 4512 items at $ 99; price is low\n", 20)
	plain, err := TrainBPE(corpus, 280)
	if err != nil {
		t.Fatal(err)
	}
	split, err := TrainBPEWith(corpus, 270, BPEOptions{SplitDigits: true})
	if err != nil {
		t.Fatal(err)
	}
	digit := func(merges []string) bool {
		return slices.ContainsFunc(merges, func(m string) bool { return strings.ContainsAny(m, "0123456789") })
	}
	if !digit(plain) {
		t.Fatalf("without SplitDigits no merge joins digits: the corpus does not test the option")
	}
	if digit(split) {
		t.Errorf("SplitDigits: merges join digits: %q", split)
	}
}
