package arena

import (
	"slices"
	"testing"
)

func TestDefaultOpponents(t *testing.T) {
	for _, c := range []struct {
		envs []string
		want []string
	}{
		{[]string{"craigslist"}, []string{"scripted:naive", "scripted:strategic"}},
		{[]string{"craigslist", "casino"}, []string{"scripted:naive", "scripted:strategic"}},
		{[]string{"werewolf"}, []string{"scripted:heuristic"}},
		{[]string{"sotopia"}, []string{"scripted:scripted"}},
		// No script in common but the degenerate ones: the default stays,
		// and the arena names the missing policy.
		{[]string{"werewolf", "craigslist"}, []string{"scripted:naive", "scripted:strategic"}},
		{[]string{"nosuchgame"}, []string{"scripted:naive", "scripted:strategic"}},
	} {
		if got := DefaultOpponents(c.envs); !slices.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.envs, got, c.want)
		}
	}
}

// TestFitOpponents: the default opponents become Werewolf's own script,
// chosen ones stay.
func TestFitOpponents(t *testing.T) {
	c := DefaultConfig()
	c.Envs = []Env{{Name: "werewolf"}}
	c.FitOpponents()
	if want := []string{"scripted:heuristic"}; !slices.Equal(c.Opponents, want) {
		t.Errorf("default opponents on werewolf: %v, want %v", c.Opponents, want)
	}
	c.Opponents = []string{"scripted:random"}
	c.FitOpponents()
	if want := []string{"scripted:random"}; !slices.Equal(c.Opponents, want) {
		t.Errorf("chosen opponents: %v, want %v", c.Opponents, want)
	}
}
