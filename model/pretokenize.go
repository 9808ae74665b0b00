package model

import (
	"unicode"
	"unicode/utf8"
)

// PreTokenizer is the value of tokenizer.ggml.pre in the files we write.
// llama.cpp maps "gpt-2" to the original GPT-2 split pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// which preSplit reproduces by hand (Go's regexp has no look-ahead),
// following llama.cpp's unicode_regex_split_custom_gpt2 step by step.
const PreTokenizer = "gpt-2"

// preSplit splits text into the pieces that BPE merges never cross.
func preSplit(text string) []string {
	runes := []rune(text)
	// byte offsets of each rune, plus the end
	offs := make([]int, len(runes)+1)
	o := 0
	for i, r := range runes {
		offs[i] = o
		if r == utf8.RuneError {
			// invalid UTF-8 decodes to U+FFFD of width 1 in the source;
			// recompute the width from the source bytes.
			_, w := utf8.DecodeRuneInString(text[o:])
			o += w
		} else {
			o += utf8.RuneLen(r)
		}
	}
	offs[len(runes)] = o
	n := len(runes)
	const (
		fLetter = 1 << iota
		fNumber
		fSpace
		fOther
	)
	flags := func(i int) int {
		if i >= n {
			return 0
		}
		r := runes[i]
		switch {
		case unicode.IsLetter(r):
			return fLetter
		case unicode.IsNumber(r):
			return fNumber
		case isSpace(r):
			return fSpace
		}
		return fOther
	}
	var out []string
	prev := 0
	add := func(end int) {
		if end > prev {
			out = append(out, text[offs[prev]:offs[end]])
		}
		prev = end
	}
	for pos := 0; pos < n; {
		c := runes[pos]
		if c == '\'' && pos+1 < n {
			nx := runes[pos+1]
			if nx == 's' || nx == 't' || nx == 'm' || nx == 'd' {
				pos += 2
				add(pos)
				continue
			}
			if pos+2 < n {
				nn := runes[pos+2]
				if (nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l') {
					pos += 3
					add(pos)
					continue
				}
			}
		}
		f2 := flags(pos)
		if c == ' ' {
			f2 = flags(pos + 1)
		}
		if f2 == fLetter || f2 == fNumber || f2 == fOther {
			class := f2
			if c == ' ' {
				pos++
			}
			for flags(pos) == class {
				pos++
			}
			add(pos)
			continue
		}
		ws := 0
		for flags(pos+ws) == fSpace {
			ws++
		}
		if ws > 1 && pos+ws < n {
			pos += ws - 1
			add(pos)
			continue
		}
		if ws > 0 {
			pos += ws
			add(pos)
			continue
		}
		pos++
		add(pos)
	}
	return out
}

// isSpace matches llama.cpp's whitespace table (unicode_ranges_whitespace).
func isSpace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0d, r == ' ', r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}
