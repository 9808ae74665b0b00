package envs

import (
	"strings"
	"testing"
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
