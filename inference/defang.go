package inference

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Defanger keeps untrusted text (another participant's words, a transcript
// shown to a judge) from forging control tokens when it is rendered into a
// prompt that is tokenised with special-token parsing on: every special
// token text gets a zero-width space after its first character, so it
// tokenises as plain text. A forged end of turn or system message is
// exactly what a policy trained against other seats or against a judge
// could learn to write.
type Defanger struct{ r *strings.Replacer }

// NewDefanger returns a Defanger for t's special tokens, or one that
// changes nothing when t does not implement SpecialTexter.
func NewDefanger(t Tokenizer) *Defanger {
	st, ok := t.(SpecialTexter)
	if !ok {
		return &Defanger{}
	}
	specials := st.SpecialTexts()
	// Longer texts first: the replacer tries patterns in order.
	slices.SortStableFunc(specials, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	var pairs []string
	for _, sp := range specials {
		if _, n := utf8.DecodeRuneInString(sp); n < len(sp) {
			pairs = append(pairs, sp, sp[:n]+"\u200b"+sp[n:])
		}
	}
	if len(pairs) == 0 {
		return &Defanger{}
	}
	return &Defanger{r: strings.NewReplacer(pairs...)}
}

// Defang returns text with every special-token text broken up.
func (d *Defanger) Defang(text string) string {
	if d == nil || d.r == nil {
		return text
	}
	return d.r.Replace(text)
}
