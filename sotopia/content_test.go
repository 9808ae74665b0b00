package sotopia

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/omar-selfplay/omar/engine"
)

func TestEmbeddedContent(t *testing.T) {
	c, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	hard, cats, rels := 0, map[string]int{}, map[Relationship]int{}
	for i, s := range c.Scenarios {
		if s.Hard {
			hard++
		}
		cats[s.Category]++
		rels[s.Relationship]++
		if len(c.Pairs[i]) != PairsPerScenario {
			t.Errorf("%s has %d pairs, want %d", s.ID, len(c.Pairs[i]), PairsPerScenario)
		}
		for _, p := range c.Pairs[i] {
			for a, id := range p {
				ch, _ := c.Character(id)
				if !s.Agents[a].Constraints.Allows(ch) {
					t.Errorf("%s: %s does not satisfy agent %d's constraints", s.ID, id, a+1)
				}
			}
		}
	}
	if len(c.Scenarios) < 40 || hard < 10 || len(c.Characters) < 20 {
		t.Errorf("got %d scenarios (%d hard) and %d characters, want ≥ 40 (≥ 10 hard) and ≥ 20", len(c.Scenarios), hard, len(c.Characters))
	}
	for _, cat := range Categories {
		if cats[cat] == 0 {
			t.Errorf("no scenario of category %s", cat)
		}
	}
	for _, r := range Relationships {
		if rels[r] == 0 {
			t.Errorf("no scenario with relationship %s", r)
		}
	}
	again, _ := LoadEmbedded()
	if !slices.EqualFunc(c.Pairs, again.Pairs, slices.Equal) {
		t.Error("pairing differs between two loads")
	}
}

const goodCharacters = `characters:
  - {id: a, name: A, age: 30, occupation: x, gender: woman, pronouns: she/her, public_info: p, personality: q, values: [v], decision_style: d, secret: s}
  - {id: b, name: B, age: 50, occupation: y, gender: man, pronouns: he/him, public_info: p, personality: q, values: [v], decision_style: d, secret: s}
`

const goodScenario = `scenarios:
  - id: s1
    category: conflict
    relationship: friend
    scenario: Something happens.
    agents:
      - role: r1
        goal: g1
      - role: r2
        goal: g2
`

func TestBrokenFiles(t *testing.T) {
	tests := []struct {
		name       string
		scenarios  string
		wantFile   string
		wantLine   int
		wantField  string
		wantSubstr string
	}{
		{"unknown field", strings.Replace(goodScenario, "    relationship: friend\n", "    relationship: friend\n    mood: tense\n", 1), "s.yaml", 5, "scenarios[0].mood", "unknown field"},
		{"misspelled nested field", strings.Replace(goodScenario, "        goal: g2", "        gaol: g2", 1), "s.yaml", 10, "scenarios[0].agents[1].gaol", "unknown field"},
		{"empty goal", strings.Replace(goodScenario, "goal: g2", "goal: \"\"", 1), "s.yaml", 10, "scenarios[0].agents[1].goal", "missing or empty"},
		{"missing text", strings.Replace(goodScenario, "    scenario: Something happens.\n", "", 1), "s.yaml", 2, "scenarios[0].scenario", "missing or empty"},
		{"bad relationship", strings.Replace(goodScenario, "friend", "rival", 1), "s.yaml", 4, "scenarios[0].relationship", `"rival" is not one of`},
		{"bad category", strings.Replace(goodScenario, "conflict", "chess", 1), "s.yaml", 3, "scenarios[0].category", `"chess" is not one of`},
		{"one agent", strings.Split(goodScenario, "      - role: r2")[0], "s.yaml", 6, "scenarios[0].agents", "has 1 entries, want 2"},
		{"hard not a bool", strings.Replace(goodScenario, "    relationship: friend\n", "    relationship: friend\n    hard: very\n", 1), "s.yaml", 5, "scenarios[0].hard", "want true or false"},
		{"age not an int", strings.Replace(goodScenario, "        goal: g1\n", "        goal: g1\n        constraints: {min_age: old}\n", 1), "s.yaml", 9, "scenarios[0].agents[0].constraints.min_age", "want an integer"},
		{"no eligible pair", strings.Replace(goodScenario, "        goal: g1\n", "        goal: g1\n        constraints: {min_age: 90}\n", 1), "s.yaml", 6, "scenarios[0].agents", "no two distinct characters"},
		{"duplicate id", goodScenario + strings.TrimPrefix(goodScenario, "scenarios:\n"), "s.yaml", 11, "scenarios[1].id", `duplicate scenario id "s1"`},
		{"yaml syntax", goodScenario + "  - id: [unclosed\n", "s.yaml", 10, "", "did not find expected"},
		{"not a list", "scenarios: {id: s1}\n", "s.yaml", 1, "scenarios", "want a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"c.yaml": {Data: []byte(goodCharacters)}, "s.yaml": {Data: []byte(tt.scenarios)}}
			_, err := Load(fsys, "dir")
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("got error %v, want a *FileError", err)
			}
			if fe.File != "dir/"+tt.wantFile || fe.Line != tt.wantLine || fe.Field != tt.wantField || !strings.Contains(fe.Msg, tt.wantSubstr) {
				t.Errorf("got %q (file %s line %d field %q), want file dir/%s line %d field %q message with %q",
					err, fe.File, fe.Line, fe.Field, tt.wantFile, tt.wantLine, tt.wantField, tt.wantSubstr)
			}
		})
	}
	t.Run("good files load", func(t *testing.T) {
		c, err := Load(fstest.MapFS{"c.yaml": {Data: []byte(goodCharacters)}, "s.yaml": {Data: []byte(goodScenario)}}, "dir")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Pairs[0]; len(got) != 2 {
			t.Errorf("got pairs %v, want both orders of a and b", got)
		}
	})
}

// TestBrokenDirParam: a custom directory with a broken file fails
// NewEpisode with the located error, and the embedded content still works.
func TestBrokenDirParam(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(goodCharacters), 0o644)
	os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(strings.Replace(goodScenario, "goal: g2", "goal: \"\"", 1)), 0o644)
	_, err := New().NewEpisode(1, engine.Params{"dir": dir})
	want := "sotopia: " + filepath.Join(dir, "s.yaml") + ":10: scenarios[0].agents[1].goal: missing or empty"
	if err == nil || err.Error() != want {
		t.Errorf("got error %v, want %s", err, want)
	}
	os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(goodScenario), 0o644)
	ep, err := New().NewEpisode(1, engine.Params{"dir": dir})
	if err != nil {
		t.Fatalf("fixed directory: %v", err)
	}
	if got := ep.Scenario().(Setup).Scenario.ID; got != "s1" {
		t.Errorf("got scenario %s, want s1", got)
	}
	if _, err := New().NewEpisode(1, nil); err != nil {
		t.Errorf("embedded content after a broken directory: %v", err)
	}
}
