package arena

import (
	"fmt"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/envs"
)

// DomainTransfer is a trained player (Options.Trained) against the
// reference, split by where it was trained: the paired difference over the
// evaluated environments it was trained on (in-domain) and over the others
// (off-domain: out-transfer). Each is the mean of its environments' changes
// (the transfer matrix's cells: every environment weighs the same, however
// many sides it has), its interval resampling episodes within every pairing
// slot. An estimate with N 0 has no environment on its side.
type DomainTransfer struct {
	Player    string   `json:"player"`
	Than      string   `json:"than"`
	InDomain  []string `json:"in_domain"`
	OffDomain []string `json:"off_domain"`
	In        Estimate `json:"in"`
	Out       Estimate `json:"out"`
}

// trainedOn reports whether e is one of the environments named in list,
// by its name or by its game's id ("craigslist" and "craigslist_v1" are
// one environment).
func trainedOn(e *env, list []string) bool {
	for _, n := range list {
		if n == e.Name {
			return true
		}
		if g, err := envs.Find(n); err == nil && g.ID() == e.game.ID() {
			return true
		}
	}
	return false
}

// domains splits every trained player's paired differences to the
// reference into in-domain and off-domain environments.
func domains(b bootstrap, trained map[string][]string, rep *Report, es []*env, slots []slotKey,
	paired func(slotKey, string, string) []float64) []DomainTransfer {
	if !slices.Contains(rep.Players, rep.Reference) {
		return nil
	}
	var out []DomainTransfer
	for _, p := range rep.Players {
		list, ok := trained[p]
		if !ok || p == rep.Reference {
			continue
		}
		d := DomainTransfer{Player: p, Than: rep.Reference}
		var in, off [][][]float64
		for _, e := range es {
			var strata [][]float64
			for _, sl := range slots {
				if sl.env == e.Name {
					strata = append(strata, paired(sl, p, rep.Reference))
				}
			}
			if trainedOn(e, list) {
				d.InDomain, in = append(d.InDomain, e.Name), append(in, strata)
			} else {
				d.OffDomain, off = append(d.OffDomain, e.Name), append(off, strata)
			}
		}
		d.In = b.groups(strings.Join([]string{"domain", "in", p}, "\x00"), in)
		d.Out = b.groups(strings.Join([]string{"domain", "out", p}, "\x00"), off)
		out = append(out, d)
	}
	return out
}

// validTrained checks Options.Trained: named players, environments the
// catalogue or the evaluation knows.
func (o Options) validTrained() []error {
	var errs []error
	for p, list := range o.Trained {
		if p == "" {
			errs = append(errs, fmt.Errorf("trained_on: a player without a name"))
		}
		for _, n := range list {
			evaluated := slices.ContainsFunc(o.Envs, func(e Env) bool { return e.Name == n })
			if _, err := envs.Find(n); err != nil && !evaluated {
				errs = append(errs, fmt.Errorf("trained_on %s: %w", p, err))
			}
		}
	}
	return errs
}

// domainLabel is a side of a DomainTransfer in words.
func domainLabel(names []string) string {
	if len(names) == 0 {
		return "none evaluated"
	}
	return strings.Join(names, ", ")
}

// domains writes every trained player's in-domain and off-domain change.
func (m *markdown) domains(b *strings.Builder) {
	if len(m.r.Domains) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## In-domain and out-transfer (paired difference to `%s`, mean over environments, %d%% CI)\n\n", m.r.Reference, m.pct)
	b.WriteString("| player | in-domain | change | off-domain | change |\n|---|---|---|---|---|\n")
	for _, d := range m.r.Domains {
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", d.Player, domainLabel(d.InDomain), d.In.signed(), domainLabel(d.OffDomain), d.Out.signed())
	}
}
