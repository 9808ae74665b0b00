package arena

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Brief writes what a terminal shows at the end of an evaluation whose
// files (WriteFiles) are in dir: each player's means, each player against
// the reference when there are several, and where the full report is.
// With no dir to point to it writes the full Markdown report itself.
func (r *Report) Brief(w io.Writer, dir string) error {
	if dir == "" {
		return r.Markdown(w)
	}
	if err := r.Means(w); err != nil {
		return err
	}
	if len(r.Players) > 1 {
		fmt.Fprintln(w)
		if err := r.Summary(w); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\nfull report: %s (and report.json, reward.svg)\n", filepath.Join(dir, "report.md"))
	return err
}

// Summary writes a short, aligned summary of r for a terminal: for each
// player other than the reference, one line per environment, side and
// opponent — the reference's mean reward → the player's, and their paired
// difference with its interval — and the difference over all of them
// last, the headline. The full report is Markdown (WriteFiles).
func (r *Report) Summary(w io.Writer) error {
	mean := map[string]float64{}
	for _, c := range r.Cells {
		mean[strings.Join([]string{c.Env, c.Side, c.Opponent, c.Player}, "\x00")] = c.Reward.Mean
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range r.Players {
		if p == r.Reference {
			continue
		}
		fmt.Fprintf(tw, "%s − %s, paired on the same held-out deals (%.0f%% intervals):\n", p, r.Reference, 100*r.Confidence)
		var all *Difference
		for i := range r.Differences {
			d := &r.Differences[i]
			if d.Player != p || d.Than != r.Reference {
				continue
			}
			if d.Env == "" {
				all = d
				continue
			}
			before := mean[strings.Join([]string{d.Env, d.Side, d.Opponent, r.Reference}, "\x00")]
			after := mean[strings.Join([]string{d.Env, d.Side, d.Opponent, p}, "\x00")]
			fmt.Fprintf(tw, "  %s\t%s\tvs %s\t%.3f → %.3f\t%s\n", d.Env, d.Side, d.Opponent, before, after, d.Diff.signed())
		}
		if all != nil {
			fmt.Fprintf(tw, "  all\t\t\t\t%s\n", all.Diff.signed())
		}
		for _, d := range r.Domains {
			if d.Player == p && d.Than == r.Reference {
				fmt.Fprintf(tw, "  in-domain\t\t\t\t%s\n", d.In.signed())
				fmt.Fprintf(tw, "  off-domain\t\t\t\t%s\n", d.Out.signed())
			}
		}
	}
	return tw.Flush()
}

// Means writes each player's mean reward for a terminal, one aligned line
// per environment, side and opponent, with its interval and the rate of
// invalid replies: what an evaluation of a single player has to say.
func (r *Report) Means(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "mean reward (%.0f%% intervals):\n", 100*r.Confidence)
	for _, p := range r.Players {
		for _, c := range r.Cells {
			if c.Player != p {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\tvs %s\t%.3f [%.3f, %.3f]\tinvalid %.1f%%\n", p, c.Env, c.Side, c.Opponent,
				c.Reward.Mean, c.Reward.Lo, c.Reward.Hi, 100*c.InvalidRate)
		}
	}
	return tw.Flush()
}
