package envs

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Entry is one environment as the catalogue lists it (`omar envs`, whose
// --json prints these fields).
type Entry struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	// Seats are the seats of the default parameters, "name(role)" where
	// the role is not the name.
	Seats       []string   `json:"seats"`
	RewardRange [2]float64 `json:"reward_range"`
	// Policies are the scripted policies' names, the default first.
	Policies []string `json:"policies"`
}

// Entries lists every environment, in the catalogue's order.
func Entries() ([]Entry, error) {
	var out []Entry
	for _, g := range all {
		e := Entry{ID: g.ID(), Description: g.Description()}
		seats, err := g.Seats(nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.ID(), err)
		}
		for _, s := range seats {
			name := s.Name
			if s.Role != "" && s.Role != s.Name {
				name += "(" + s.Role + ")"
			}
			e.Seats = append(e.Seats, name)
		}
		e.RewardRange[0], e.RewardRange[1] = g.RewardRange()
		for _, p := range g.Policies() {
			e.Policies = append(e.Policies, p.Name)
		}
		out = append(out, e)
	}
	return out, nil
}

// WriteTable writes entries as a table aligned for a terminal.
func WriteTable(w io.Writer, entries []Entry) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSEATS\tREWARD\tPOLICIES\tDESCRIPTION")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t[%g, %g]\t%s\t%s\n", e.ID, strings.Join(e.Seats, " "), e.RewardRange[0], e.RewardRange[1], strings.Join(e.Policies, ","), e.Description)
	}
	return tw.Flush()
}
