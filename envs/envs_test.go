package envs

import (
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

func TestFind(t *testing.T) {
	for _, g := range All() {
		got, err := Find(g.ID())
		if err != nil || got.ID() != g.ID() {
			t.Errorf("Find(%q) = %v, %v", g.ID(), got, err)
		}
	}
	for _, id := range Negotiation {
		if _, err := Find(id); err != nil {
			t.Errorf("Find(%q): %v", id, err)
		}
	}
	if _, err := Find("nosuchgame"); err == nil || !strings.Contains(err.Error(), "craigslist") {
		t.Errorf("Find(nosuchgame) error %v, want one listing the known ids", err)
	}
}

// TestDefaultParams: a game's listed defaults are parameters it takes,
// and they deal the seats no parameters deal (the web page's form sends
// them back, changed or not).
func TestDefaultParams(t *testing.T) {
	for _, g := range All() {
		d, ok := g.(engine.ParamDefaulter)
		if !ok {
			continue
		}
		t.Run(g.ID(), func(t *testing.T) {
			p := d.DefaultParams()
			if len(p) == 0 {
				t.Fatal("no parameters listed")
			}
			want, err := g.Seats(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Seats(p)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("seats of the defaults %v (%v), want %v", got, err, want)
			}
			if _, err := g.NewEpisode(1, p); err != nil {
				t.Errorf("the defaults %v deal no episode: %v", p, err)
			}
		})
	}
}

// TestEntries: every environment is listed with its seats (roles where
// they differ from the names), policies and description, and the table
// has a row each.
func TestEntries(t *testing.T) {
	entries, err := Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(All()) {
		t.Fatalf("%d entries for %d environments", len(entries), len(All()))
	}
	byID := map[string]Entry{}
	for _, e := range entries {
		byID[e.ID] = e
		if len(e.Seats) == 0 || len(e.Policies) == 0 || e.Description == "" {
			t.Errorf("%s: incomplete %+v", e.ID, e)
		}
	}
	if s := byID["sealedbid_v1"].Seats; len(s) == 0 || s[0] != "bidder1(bidder)" {
		t.Errorf("sealedbid_v1 seats %v, want bidder1(bidder) first", s)
	}
	var b strings.Builder
	if err := WriteTable(&b, entries); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 1+len(entries) || !strings.HasPrefix(lines[0], "ID  ") {
		t.Errorf("table of %d lines for %d entries:\n%s", len(lines), len(entries), b.String())
	}
}
