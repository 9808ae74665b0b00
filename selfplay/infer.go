package selfplay

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// The INFER reward (Options.InferReward) scores how well the INFER line of
// a theory-of-mind trace names what the counterpart privately wants,
// which the environment knows (engine.PreferenceScenario). A seat's
// accuracy is the mean over its traced turns (a turn without an INFER
// line scores 0); the seat's reward gets InferReward × accuracy.

// inferLine returns the text of a traced reply's INFER line.
func inferLine(reply string) (string, bool) {
	for line := range strings.SplitSeq(reply, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "INFER:"); ok {
			return strings.TrimSpace(s), true
		}
	}
	return "", false
}

// InferAccuracy scores an INFER line against the counterpart's
// preferences p, in [0, 1], deterministically:
//
//   - Issues (CaSiNo, Deal-or-No-Deal, Job Interview): the line ranks the
//     issues by their first mention (any of an issue's names, any case,
//     as whole words, a trailing "s" allowed); issues it does not mention
//     tie last. The score is the share of the pairs of issues that the
//     counterpart values differently which the line orders the same way;
//     a tie counts as wrong. Naming nothing scores 0, a random order .5
//     on average, the right order 1; naming only the most valued issue
//     gets the pairs it heads.
//   - Price (Craigslist's buyer target, Marketplace's reservation
//     prices): the line's first number g (digits with optional $, thousands
//     commas, decimals, a trailing k for thousands) scores
//     max(0, 1 − |g − price| / scale), scale the public listing or asking
//     price; no number scores 0.
//
// With both kinds the score is their mean; with neither (nothing to
// infer) it is 0.
func InferAccuracy(line string, p engine.Preferences) float64 {
	var parts []float64
	if len(p.Issues) > 1 {
		parts = append(parts, issueOrderScore(line, p.Issues))
	}
	if p.Scale > 0 {
		parts = append(parts, priceScore(line, p.Price, p.Scale))
	}
	if len(parts) == 0 {
		return 0
	}
	sum := 0.0
	for _, v := range parts {
		sum += v
	}
	return sum / float64(len(parts))
}

// issueOrderScore is the pairwise agreement of the line's order of first
// mention with the issues' values.
func issueOrderScore(line string, issues []engine.Issue) float64 {
	agree, pairs := issueOrderPairs(line, issues)
	if pairs == 0 {
		return 0
	}
	return float64(agree) / float64(pairs)
}

// InferExact is the exact-match companion of InferAccuracy's issue part:
// 1 when the line's order of first mention is the counterpart's order of
// its issues, else 0. Issues the counterpart values the same may be named
// in either order, and the least valued ones may go unnamed (unnamed
// issues tie last); any other unnamed issue, or two named in the wrong
// order, misses. It is 1 exactly where the pairwise score is 1. ok is
// false where there is no order to name (fewer than two issues of
// different value: price games).
func InferExact(line string, p engine.Preferences) (float64, bool) {
	agree, pairs := issueOrderPairs(line, p.Issues)
	if pairs == 0 {
		return 0, false
	}
	return b2f(agree == pairs), true
}

// issueOrderPairs counts the pairs of issues of different value (pairs)
// and those the line's order of first mention gets right (agree).
func issueOrderPairs(line string, issues []engine.Issue) (agree, pairs int) {
	pos := make([]int, len(issues))
	for i, is := range issues {
		pos[i] = firstMention(line, is.Names)
	}
	for i := range issues {
		for j := i + 1; j < len(issues); j++ {
			vi, vj := issues[i].Value, issues[j].Value
			if vi == vj {
				continue
			}
			pairs++
			hi, lo := pos[i], pos[j] // hi: the more valued issue's mention
			if vj > vi {
				hi, lo = lo, hi
			}
			if hi < lo {
				agree++
			}
		}
	}
	return agree, pairs
}

// firstMention is the byte offset of the first whole-word mention of any
// of names in line, or MaxInt when there is none.
func firstMention(line string, names []string) int {
	best := math.MaxInt
	for _, n := range names {
		if n == "" {
			continue
		}
		re, err := regexp.Compile(`(?i)\b` + regexp.QuoteMeta(n) + `s?\b`)
		if err != nil {
			continue
		}
		if loc := re.FindStringIndex(line); loc != nil && loc[0] < best {
			best = loc[0]
		}
	}
	return best
}

var inferNumber = regexp.MustCompile(`(?i)(\d[\d,]*(?:\.\d+)?)(\s*k\b)?`)

// priceScore scores the line's first number against price.
func priceScore(line string, price, scale float64) float64 {
	g, ok := firstNumber(line)
	if !ok {
		return 0
	}
	return max(0, 1-math.Abs(g-price)/scale)
}

// firstNumber parses the first number of s (see InferAccuracy).
func firstNumber(s string) (float64, bool) {
	m := inferNumber.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	if m[2] != "" {
		v *= 1000
	}
	return v, true
}

// inferAccuracy is a seat's mean INFER accuracy over its traced turns
// (texts), scored against p.
func inferAccuracy(texts []string, p engine.Preferences) float64 {
	if len(texts) == 0 {
		return 0
	}
	sum := 0.0
	for _, t := range texts {
		if line, ok := inferLine(t); ok {
			sum += InferAccuracy(line, p)
		}
	}
	return sum / float64(len(texts))
}
