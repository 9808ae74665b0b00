package negotiation

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

var numberRE = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?(k\b)?`)

// Numbers returns the numbers written in text ("$1,200", "99.5", "12k").
func Numbers(text string) []float64 {
	var out []float64
	for _, m := range numberRE.FindAllStringSubmatch(text, -1) {
		s := strings.TrimSuffix(strings.ReplaceAll(m[0], ",", ""), "k")
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			continue
		}
		if m[1] != "" {
			v *= 1000
		}
		out = append(out, v)
	}
	return out
}

// MentionsNumber reports whether any message states v (to the cent, or
// within 0.5% for large amounts): the disclosure test for a private price.
func MentionsNumber(msgs []string, v float64) bool {
	for _, m := range msgs {
		for _, n := range Numbers(m) {
			if math.Abs(n-v) < max(0.005, 0.005*math.Abs(v)) {
				return true
			}
		}
	}
	return false
}

// StatesValue reports whether a message names name (as a word prefix, so
// "book" matches "books") and then, within a few words, the number v: the
// disclosure test for a private per-item value ("books are worth 3 to me").
func StatesValue(msgs []string, name string, v float64) bool {
	re := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(name) + `\w*\W+(?:\w+\W+){0,4}?(\d+(?:\.\d+)?)`)
	for _, m := range msgs {
		for _, sm := range re.FindAllStringSubmatch(m, -1) {
			n, err := strconv.ParseFloat(sm[1], 64)
			if err == nil && math.Abs(n-v) < 1e-9 {
				return true
			}
		}
	}
	return false
}
