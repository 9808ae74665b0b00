package selfplay

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
)

// Reasons a turn guard gives for a degenerate turn (the rule-based guard's
// vocabulary; other guards may use their own words).
const (
	// FlagEmpty: the reply has no text but white space.
	FlagEmpty = "empty"
	// FlagInvalid: the engine rejected the reply (a validation_error
	// answered it: unparsable, illegal or stale).
	FlagInvalid = "invalid"
	// FlagDefaulted: the decision the reply answered fell back to the
	// inert default (the reply was the last one the retry budget allowed).
	FlagDefaulted = "defaulted"
	// FlagRepetition: one short n-gram covers most of the reply.
	FlagRepetition = "repetition"
	// FlagCopy: the reply copies a long span of its prompt verbatim.
	FlagCopy = "copy"
	// FlagTruncated: generation hit the token limit (or the context's end)
	// before the reply ended.
	FlagTruncated = "truncated"
)

// GuardTurn is what a TurnGuard sees of one model turn.
type GuardTurn struct {
	Env     string
	Episode int // index of the episode in the run
	Seat    engine.Seat
	// Notification is the decision the reply answered.
	Notification engine.Notification
	// Prompt is the seat's stream before the reply (the current segment:
	// rendered events and the seat's earlier replies).
	Prompt []int32
	// Reply are the sampled ids without the end-of-turn token; Text is
	// their decoding, the action the engine received.
	Reply []int32
	Text  string
	// Stop is why generation ended; MaxTokens the limit it ran under.
	Stop      inference.StopReason
	MaxTokens int
	// Rejection is the engine's validation error for this reply ("" when
	// it was accepted); Defaulted says the decision fell back to the
	// default after it.
	Rejection string
	Defaulted bool
}

// TurnGuard flags degenerate turns. A flagged turn keeps its tokens in
// the trajectory, but the estimators zero its credit (see advantage.Sample.Flagged).
// Check returns the reasons (none for a sound turn; every reason a
// non-empty string); an error is for failures of the guard itself (a
// judge's backend), never for a bad reply. Implementations must be safe
// for concurrent use: episodes run in parallel. An LLM judge implements it
// in the caller's package; selfplay only knows the rule-based RuleGuard.
type TurnGuard interface {
	Check(ctx context.Context, t GuardTurn) ([]string, error)
}

// GuardOptions configure the rule-based guard and whether a guard runs.
// A zero threshold turns its rule off.
type GuardOptions struct {
	// Enabled runs the guard on every kept trajectory.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Empty, Invalid, Defaulted and Truncated switch the simple rules.
	Empty     bool `yaml:"empty" json:"empty"`
	Invalid   bool `yaml:"invalid" json:"invalid"`
	Defaulted bool `yaml:"defaulted" json:"defaulted"`
	Truncated bool `yaml:"truncated" json:"truncated"`
	// Repetition: a reply of at least RepeatMinTokens tokens in which one
	// n-gram (1 ≤ n ≤ RepeatMaxN) occurs at least RepeatMinCount times and
	// its occurrences cover more than RepeatCoverage of the reply's tokens.
	RepeatMinTokens int     `yaml:"repeat_min_tokens" json:"repeat_min_tokens"`
	RepeatMaxN      int     `yaml:"repeat_max_n" json:"repeat_max_n"`
	RepeatMinCount  int     `yaml:"repeat_min_count" json:"repeat_min_count"`
	RepeatCoverage  float64 `yaml:"repeat_coverage" json:"repeat_coverage"`
	// CopyMinTokens: a reply containing a span of at least this many
	// tokens that occurs verbatim in its prompt (0 = off).
	CopyMinTokens int `yaml:"copy_min_tokens" json:"copy_min_tokens"`
}

// Defaults are conservative: every rule on, a 3-gram (or shorter) must
// cover more than 60% of a reply of 8+ tokens with 3+ occurrences, and a
// copy must be 32 tokens long — far beyond quoting a price or a move. The
// thresholds are our defaults (OMAR does not publish its judge's rules).
func (GuardOptions) Defaults() GuardOptions {
	return GuardOptions{
		Enabled: true, Empty: true, Invalid: true, Defaulted: true, Truncated: true,
		RepeatMinTokens: 8, RepeatMaxN: 3, RepeatMinCount: 3, RepeatCoverage: 0.6,
		CopyMinTokens: 32,
	}
}

// Validate checks the thresholds.
func (o GuardOptions) Validate() error {
	switch {
	case o.RepeatMinTokens < 0:
		return fmt.Errorf("selfplay: guard repeat_min_tokens %d < 0", o.RepeatMinTokens)
	case o.RepeatMinTokens > 0 && o.RepeatMaxN < 1:
		return fmt.Errorf("selfplay: guard repeat_max_n %d < 1", o.RepeatMaxN)
	case o.RepeatMinTokens > 0 && o.RepeatMinCount < 2:
		return fmt.Errorf("selfplay: guard repeat_min_count %d < 2", o.RepeatMinCount)
	case o.RepeatMinTokens > 0 && (math.IsNaN(o.RepeatCoverage) || o.RepeatCoverage <= 0 || o.RepeatCoverage >= 1):
		return fmt.Errorf("selfplay: guard repeat_coverage %v, want (0, 1)", o.RepeatCoverage)
	case o.CopyMinTokens < 0:
		return fmt.Errorf("selfplay: guard copy_min_tokens %d < 0", o.CopyMinTokens)
	}
	return nil
}

// RuleGuard is the rule-based TurnGuard (no model involved).
type RuleGuard struct{ o GuardOptions }

// NewRuleGuard returns the rule-based guard with options o.
func NewRuleGuard(o GuardOptions) (*RuleGuard, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &RuleGuard{o: o}, nil
}

// Check implements TurnGuard. The reasons come in a fixed order.
func (g *RuleGuard) Check(_ context.Context, t GuardTurn) ([]string, error) {
	return g.reasons(t), nil
}

func (g *RuleGuard) reasons(t GuardTurn) []string {
	o := g.o
	var out []string
	if o.Empty && strings.TrimSpace(t.Text) == "" {
		out = append(out, FlagEmpty)
	}
	if o.Invalid && t.Rejection != "" {
		out = append(out, FlagInvalid)
	}
	if o.Defaulted && t.Defaulted {
		out = append(out, FlagDefaulted)
	}
	if o.RepeatMinTokens > 0 && len(t.Reply) >= o.RepeatMinTokens &&
		repeatCoverage(t.Reply, o.RepeatMaxN, o.RepeatMinCount) > o.RepeatCoverage {
		out = append(out, FlagRepetition)
	}
	if o.CopyMinTokens > 0 && copiesSpan(t.Prompt, t.Reply, o.CopyMinTokens) {
		out = append(out, FlagCopy)
	}
	if o.Truncated && (t.Stop == inference.StopLength || t.Stop == inference.StopFull) {
		out = append(out, FlagTruncated)
	}
	return out
}

// ngramKey encodes n token ids as a map key.
func ngramKey(ids []int32) string {
	b := make([]byte, 0, 4*len(ids))
	for _, t := range ids {
		b = append(b, byte(t), byte(t>>8), byte(t>>16), byte(t>>24))
	}
	return string(b)
}

// repeatCoverage is the largest share of reply's tokens covered by the
// occurrences (overlaps counted once) of a single n-gram, 1 ≤ n ≤ maxN,
// that occurs at least minCount times. Only the maximum is returned, so
// the map's iteration order does not matter.
func repeatCoverage(reply []int32, maxN, minCount int) float64 {
	if len(reply) == 0 {
		return 0
	}
	best := 0
	for n := 1; n <= maxN && n <= len(reply); n++ {
		pos := map[string][]int{}
		for i := 0; i+n <= len(reply); i++ {
			k := ngramKey(reply[i : i+n])
			pos[k] = append(pos[k], i)
		}
		for _, ps := range pos {
			if len(ps) < minCount {
				continue
			}
			// Occurrences are in increasing order: the union of the
			// intervals [p, p+n) is their lengths less the overlaps.
			covered, end := 0, 0
			for _, p := range ps {
				covered += p + n - max(p, end)
				end = p + n
			}
			best = max(best, covered)
		}
	}
	return float64(best) / float64(len(reply))
}

// copiesSpan reports whether reply holds a run of minLen tokens that
// occurs verbatim in prompt. Windows are compared by a rolling hash
// (Rabin–Karp), so the cost is linear in the prompt; a hash match is
// confirmed token by token, and a collision falls back to a plain search,
// so the answer is exact.
func copiesSpan(prompt, reply []int32, minLen int) bool {
	if minLen <= 0 || len(reply) < minLen || len(prompt) < minLen {
		return false
	}
	const base = 1_000_003
	var pow uint64 = 1 // base^(minLen−1)
	for range minLen - 1 {
		pow *= base
	}
	// windows calls f with the start and hash of every window of s.
	windows := func(s []int32, f func(i int, h uint64) bool) bool {
		var h uint64
		for i, t := range s {
			if i >= minLen {
				h -= uint64(uint32(s[i-minLen])) * pow
			}
			h = h*base + uint64(uint32(t))
			if i >= minLen-1 && f(i-minLen+1, h) {
				return true
			}
		}
		return false
	}
	first := make(map[uint64]int, len(prompt)-minLen+1)
	windows(prompt, func(i int, h uint64) bool {
		if _, ok := first[h]; !ok {
			first[h] = i
		}
		return false
	})
	return windows(reply, func(i int, h uint64) bool {
		p, ok := first[h]
		if !ok {
			return false
		}
		w := reply[i : i+minLen]
		if slices.Equal(prompt[p:p+minLen], w) {
			return true
		}
		for q := 0; q+minLen <= len(prompt); q++ {
			if slices.Equal(prompt[q:q+minLen], w) {
				return true
			}
		}
		return false
	})
}
