package negotiation

import (
	"regexp"
	"strings"
)

// CommitmentPhrases is the lexicon of commitment language (docs/mission.md
// §3 lists it among the behaviour metrics): phrases that bind the speaker
// to its position or close the bargaining. Matching is case-insensitive
// and word-bounded; "can't", "cannot" and "can not" are one form, and a
// typographic apostrophe reads like a straight one. The list is short on
// purpose: "best offer" or "firm" alone are as often questions ("what is
// your best offer?") as commitments.
var CommitmentPhrases = []string{
	`final offer`,
	`last offer`,
	`best and final`,
	`take it or leave it`,
	`my bottom line`,
	`non-?negotiable`,
	`(?:can'?t|cannot|can not|won'?t|will not) go (?:any )?(?:lower|higher|further|below|above)`,
	`not a (?:penny|cent|dollar) (?:more|less|lower|higher)`,
	`as (?:low|high|far) as I can go`,
	`that'?s final`,
	`(?:price|offer) is firm`,
	`or I(?:'ll| will)? walk`,
}

var commitmentRE = regexp.MustCompile(`(?i)\b(?:` + strings.Join(CommitmentPhrases, "|") + `)\b`)

// apostrophes maps the typographic apostrophe to the straight one, so
// "can’t" matches like "can't".
var apostrophes = regexp.MustCompile(`[\x{2018}\x{2019}\x{02BC}]`)

// Commits reports whether a message uses commitment language
// (CommitmentPhrases).
func Commits(msg string) bool {
	return commitmentRE.MatchString(apostrophes.ReplaceAllString(msg, "'"))
}

// CommitmentRate is the share of msgs that use commitment language; ok is
// false when there are no messages.
func CommitmentRate(msgs []string) (rate float64, ok bool) {
	if len(msgs) == 0 {
		return 0, false
	}
	n := 0
	for _, m := range msgs {
		if Commits(m) {
			n++
		}
	}
	return float64(n) / float64(len(msgs)), true
}
