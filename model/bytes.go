package model

// GPT-2 byte-level BPE does not operate on raw bytes: every byte is first
// mapped to a printable Unicode character (space → "Ġ", newline → "Ċ", …)
// so that tokens and merges are plain strings without whitespace or control
// characters. llama.cpp applies the same mapping (unicode_byte_to_utf8).

var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	// Printable bytes keep their code point; the others are shifted to
	// 256, 257, … in byte order, exactly as in GPT-2's bytes_to_unicode.
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteEncode maps raw bytes to their byte-level BPE string.
func byteEncode(s string) string {
	out := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = byteToRune[s[i]]
	}
	return string(out)
}

// byteDecode reverses byteEncode. Characters outside the mapping are kept
// as their UTF-8 bytes (they cannot occur in tokens of our vocabularies).
func byteDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			out = append(out, b)
		} else {
			out = append(out, string(r)...)
		}
	}
	return out
}
