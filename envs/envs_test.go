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
