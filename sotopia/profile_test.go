package sotopia

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

func TestVisible(t *testing.T) {
	c := Character{
		ID: "x", Name: "Ada Park", Age: 40, Occupation: "pilot", Gender: "woman", Pronouns: "she/her",
		PublicInfo: "flies cargo", Personality: "calm", Values: []string{"safety"}, DecisionStyle: "checklists", Secret: "hidden debt",
	}
	// want lists the fields each level reveals (the table in docs/sotopia.md).
	tests := []struct {
		rel  Relationship
		want ProfileView
	}{
		{Stranger, ProfileView{}},
		{KnowByName, ProfileView{Name: "Ada Park"}},
		{Acquaintance, ProfileView{Name: "Ada Park", Age: 40, Occupation: "pilot", Gender: "woman", Pronouns: "she/her"}},
		{Friend, ProfileView{Name: "Ada Park", Age: 40, Occupation: "pilot", Gender: "woman", Pronouns: "she/her", PublicInfo: "flies cargo", Personality: "calm", Values: []string{"safety"}}},
		{Romantic, ProfileView{Name: "Ada Park", Age: 40, Occupation: "pilot", Gender: "woman", Pronouns: "she/her", PublicInfo: "flies cargo", Personality: "calm", Values: []string{"safety"}, DecisionStyle: "checklists"}},
		{Family, ProfileView{Name: "Ada Park", Age: 40, Occupation: "pilot", Gender: "woman", Pronouns: "she/her", PublicInfo: "flies cargo", Personality: "calm", Values: []string{"safety"}, DecisionStyle: "checklists"}},
	}
	if len(tests) != len(Relationships) {
		t.Fatalf("table covers %d relationships, want %d", len(tests), len(Relationships))
	}
	for _, tt := range tests {
		t.Run(string(tt.rel), func(t *testing.T) {
			got, _ := json.Marshal(Visible(c, tt.rel))
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Errorf("got %s, want %s", got, want)
			}
			if strings.Contains(Visible(c, tt.rel).Describe(), c.Secret) {
				t.Error("the description shows the secret")
			}
		})
	}
}

// TestEpisodeVisibility plays one episode per relationship with silent
// agents and checks every event each seat may see: its own secret and goal
// are there, the other's secret and goal never are, and the other's
// profile fields appear exactly as the relationship allows.
func TestEpisodeVisibility(t *testing.T) {
	for _, rel := range Relationships {
		t.Run(string(rel), func(t *testing.T) {
			ep := episodeWith(t, rel)
			silent, _ := engine.ScriptedCast(New(), []string{"silent"}, 1)
			var agents []engine.Agent
			for _, s := range ep.Seats() {
				a, _, _ := silent(s)
				agents = append(agents, a)
			}
			rt, err := engine.NewRuntime(ep.Seats(), agents, engine.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if err := ep.Run(context.Background(), rt); err != nil {
				t.Fatal(err)
			}
			for seat := range 2 {
				b, _ := json.Marshal(rt.Log().View(seat))
				view := string(b)
				me, other := ep.setup.Characters[seat], ep.setup.Characters[1-seat]
				has := func(s string) bool {
					j, _ := json.Marshal(s)
					return strings.Contains(view, strings.Trim(string(j), `"`))
				}
				for _, must := range []string{me.Secret, ep.setup.Scenario.Agents[seat].Goal, ep.setup.Scenario.Text} {
					if !has(must) {
						t.Errorf("seat %d does not see %q", seat, must)
					}
				}
				for _, never := range []string{other.Secret, ep.setup.Scenario.Agents[1-seat].Goal} {
					if has(never) {
						t.Errorf("seat %d sees %q", seat, never)
					}
				}
				l := rel.level()
				fields := []struct {
					val  string
					from Relationship
				}{
					{other.Name, KnowByName}, {other.Occupation, Acquaintance}, {fmt.Sprintf(`"age":%d`, other.Age), Acquaintance},
					{other.PublicInfo, Friend}, {other.Personality, Friend}, {other.DecisionStyle, Romantic},
				}
				for _, f := range fields {
					want := l >= f.from.level()
					got := has(f.val) || strings.Contains(view, f.val)
					if got != want {
						t.Errorf("seat %d sees %q: got %v, want %v", seat, f.val, got, want)
					}
				}
			}
		})
	}
}
