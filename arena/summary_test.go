package arena

import (
	"strings"
	"testing"
)

func summaryReport() *Report {
	est := func(m, lo, hi float64) Estimate { return Estimate{Mean: m, Lo: lo, Hi: hi, N: 64} }
	return &Report{
		Confidence: 0.95, Players: []string{"base", "trained"}, Reference: "base",
		Cells: []Cell{
			{Env: "casino", Side: "a", Opponent: "scripted:naive", Player: "base", Reward: est(0.25, 0.2, 0.3)},
			{Env: "casino", Side: "a", Opponent: "scripted:naive", Player: "trained", Reward: est(0.5, 0.45, 0.55)},
			{Env: "casino", Side: "b", Opponent: "scripted:naive", Player: "base", Reward: est(0.75, 0.7, 0.8)},
			{Env: "casino", Side: "b", Opponent: "scripted:naive", Player: "trained", Reward: est(0.625, 0.6, 0.65)},
		},
		Differences: []Difference{
			{Env: "casino", Side: "a", Opponent: "scripted:naive", Player: "trained", Than: "base", Diff: est(0.25, 0.2, 0.3)},
			{Env: "casino", Side: "b", Opponent: "scripted:naive", Player: "trained", Than: "base", Diff: est(-0.125, -0.2, -0.05)},
			{Player: "trained", Than: "base", Diff: est(0.0625, 0.01, 0.11)},
		},
	}
}

func TestSummary(t *testing.T) {
	r := summaryReport()
	var b strings.Builder
	if err := r.Summary(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	want := "trained − base, paired on the same held-out deals (95% intervals):\n" +
		"  casino  a  vs scripted:naive  0.250 → 0.500  +0.250 [+0.200, +0.300]\n" +
		"  casino  b  vs scripted:naive  0.750 → 0.625  -0.125 [-0.200, -0.050]\n" +
		"  all                                          +0.062 [+0.010, +0.110]\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("line of %d columns: %q", len([]rune(line)), line)
		}
	}
}

// TestBrief: with a directory the end of an evaluation is the means, the
// comparison (with two players or more) and the report's path; without
// one, the Markdown report.
func TestBrief(t *testing.T) {
	r := summaryReport()
	var b strings.Builder
	if err := r.Brief(&b, "out"); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"mean reward (95% intervals):\n", "\n\ntrained − base, paired", "\n\nfull report: out/report.md (and report.json, reward.svg)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("got\n%s\nwant it to contain %q", got, want)
		}
	}
	r.Players = r.Players[:1]
	b.Reset()
	if err := r.Brief(&b, "out"); err != nil || strings.Contains(b.String(), "paired") {
		t.Errorf("one player compared (%v):\n%s", err, b.String())
	}
	var md strings.Builder
	b.Reset()
	if err := r.Brief(&b, ""); err != nil || r.Markdown(&md) != nil || b.String() != md.String() {
		t.Errorf("without a directory (%v), got\n%s\nwant the Markdown report", err, b.String())
	}
}
