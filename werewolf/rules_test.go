package werewolf

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

func TestDecodeParams(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      engine.Params
		want    RoleCounts
		wantErr string
	}{
		{"default", nil, RoleCounts{Werewolf: 2, Seer: 1, Doctor: 1, Villager: 3}, ""},
		{"five", engine.Params{"players": 5}, RoleCounts{Werewolf: 1, Seer: 1, Doctor: 1, Villager: 2}, ""},
		{"witch_guard", engine.Params{"witch": true, "guard": true}, RoleCounts{Werewolf: 2, Seer: 1, Doctor: 1, Witch: 1, Guard: 1, Villager: 1}, ""},
		{"eleven", engine.Params{"players": 11}, RoleCounts{Werewolf: 3, Seer: 1, Doctor: 1, Villager: 6}, ""},
		{"list", engine.Params{"roles": []any{"werewolf", "Seer", "villager", "villager"}}, RoleCounts{Werewolf: 1, Seer: 1, Villager: 2}, ""},
		{"object", engine.Params{"roles": map[string]any{"werewolf": 2, "guard": 1, "villager": 3}, "players": 6}, RoleCounts{Werewolf: 2, Guard: 1, Villager: 3}, ""},
		{"too_few", engine.Params{"players": 3}, nil, "outside"},
		{"too_many", engine.Params{"players": 21}, nil, "outside"},
		{"parity", engine.Params{"roles": map[string]any{"werewolf": 2, "villager": 2}}, nil, "fewer than the others"},
		{"no_wolf", engine.Params{"roles": map[string]any{"seer": 1, "villager": 4}}, nil, "at least one werewolf"},
		{"two_seers", engine.Params{"roles": map[string]any{"werewolf": 1, "seer": 2, "villager": 3}}, nil, "at most one seer"},
		{"unknown_role", engine.Params{"roles": map[string]any{"werewolf": 1, "hunter": 1, "villager": 3}}, nil, "unknown roles"},
		{"mismatch", engine.Params{"players": 7, "roles": map[string]any{"werewolf": 1, "villager": 4}}, nil, "add up to 5"},
		{"witch_with_roles", engine.Params{"witch": true, "roles": map[string]any{"werewolf": 1, "villager": 4}}, nil, "cannot be combined"},
		{"no_villager_for_guard", engine.Params{"players": 4, "witch": true, "guard": true}, nil, "no villager left"},
		{"gamma", engine.Params{"gamma": 1.5}, nil, "gamma"},
		{"cycles", engine.Params{"max_cycles": 0}, nil, "max_cycles"},
		{"shaping", engine.Params{"shaping": map[string]any{"kill": -1}}, nil, "shaping kill"},
		{"unknown_key", engine.Params{"werewolves": 3}, nil, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeParams(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			for _, r := range roleOrder {
				if got.Roles[r] != tc.want[r] {
					t.Errorf("%s: got %d, want %d (roles %v)", r, got.Roles[r], tc.want[r], got.Roles)
				}
			}
			if got.Players != tc.want.Total() {
				t.Errorf("players: got %d, want %d", got.Players, tc.want.Total())
			}
		})
	}
}

func TestTally(t *testing.T) {
	v := func(voter, target int) SeatChoice {
		if target < 0 {
			return SeatChoice{voter, Choice{VerbAbstain, -1}}
		}
		return SeatChoice{voter, Choice{VerbVote, target}}
	}
	for _, tc := range []struct {
		name     string
		votes    []SeatChoice
		out, top int
		tie      bool
	}{
		{"majority", []SeatChoice{v(0, 2), v(1, 2), v(2, 0)}, 2, 2, false},
		{"plurality", []SeatChoice{v(0, 2), v(1, 2), v(2, 0), v(3, 1), v(4, -1)}, 2, 2, false},
		{"tie", []SeatChoice{v(0, 2), v(1, 3), v(2, -1)}, -1, 1, true},
		{"tie_after_lead", []SeatChoice{v(0, 2), v(1, 2), v(2, 3), v(3, 3)}, -1, 2, true},
		{"lead_after_tie", []SeatChoice{v(0, 2), v(1, 3), v(2, 3)}, 3, 2, false},
		{"all_abstain", []SeatChoice{v(0, -1), v(1, -1)}, -1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, top, tie := tally(tc.votes)
			if out != tc.out || top != tc.top || tie != tc.tie {
				t.Errorf("got (%d, %d, %v), want (%d, %d, %v)", out, top, tie, tc.out, tc.top, tc.tie)
			}
		})
	}
}

func TestConsensus(t *testing.T) {
	k := func(s, target int) SeatChoice { return SeatChoice{s, Choice{VerbKill, target}} }
	none := func(s int) SeatChoice { return SeatChoice{s, Choice{VerbNone, -1}} }
	for _, tc := range []struct {
		name    string
		choices []SeatChoice
		want    int
	}{
		{"lone", []SeatChoice{k(0, 3)}, 3},
		{"agree", []SeatChoice{k(0, 3), k(5, 3)}, 3},
		{"disagree", []SeatChoice{k(0, 3), k(5, 4)}, -1},
		{"veto", []SeatChoice{k(0, 3), none(5)}, -1},
		{"all_none", []SeatChoice{none(0), none(5)}, -1},
		{"empty", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := consensus(tc.choices); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestReward(t *testing.T) {
	for _, tc := range []struct {
		name, team, winner string
		end, elim          int
		want               float64
	}{
		{"survivor_wins", TeamVillagers, TeamVillagers, 4, 0, 1},
		{"survivor_loses", TeamWerewolves, TeamVillagers, 4, 0, -1},
		{"dead_at_end", TeamVillagers, TeamVillagers, 4, 4, 1},
		{"dead_early_wins", TeamVillagers, TeamVillagers, 4, 1, 0.9 * 0.9 * 0.9},
		{"dead_early_loses", TeamWerewolves, TeamVillagers, 4, 2, -0.81},
		{"draw", TeamWerewolves, "draw", 10, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reward(tc.team, tc.winner, 0.9, tc.end, tc.elim); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSpeakingOrder(t *testing.T) {
	p, _ := DecodeParams(nil)
	e := newEpisode(p, []string{Werewolf, Seer, Doctor, Villager, Werewolf, Villager, Villager})
	e.alive[2], e.alive[3] = false, false
	for _, tc := range []struct {
		cycle int
		want  []int
	}{{1, []int{0, 1, 4, 5, 6}}, {2, []int{1, 4, 5, 6, 0}}, {3, []int{4, 5, 6, 0, 1}}, {8, []int{0, 1, 4, 5, 6}}, {9, []int{1, 4, 5, 6, 0}}} {
		if got := e.speakingOrder(tc.cycle); !slices.Equal(got, tc.want) {
			t.Errorf("day %d: got %v, want %v", tc.cycle, got, tc.want)
		}
	}
}

// script answers a notification from the seat, what it is asked and the
// legal moves; "" means the first legal move... or PassSpeech.
type script func(s engine.Seat, info AskInfo, legal []string) string

// runFixed plays an episode with roles dealt as given, every seat answering
// through sc.
func runFixed(t *testing.T, p engine.Params, roles []string, sc script) (*episode, *engine.Runtime) {
	t.Helper()
	params, err := DecodeParams(p)
	if err != nil {
		t.Fatal(err)
	}
	e := newEpisode(params, roles)
	agents := make([]engine.Agent, len(roles))
	for i := range agents {
		agents[i] = engine.AgentFunc(func(_ context.Context, turn engine.Turn) (engine.Action, error) {
			info := turn.Notification.Data.(AskInfo)
			text := sc(turn.Seat, info, turn.Notification.Legal)
			if text == "" {
				text = PassSpeech
				if l := turn.Notification.Legal; len(l) > 0 {
					text = l[len(l)-1] // the inert move is listed last
				}
			}
			return engine.Action{NotificationID: turn.Notification.ID, Text: text}, nil
		})
	}
	rt, err := engine.NewRuntime(e.Seats(), agents, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	return e, rt
}

// seats: p1 wolf, p2 seer, p3 doctor, p4 villager, p5 wolf, p6 witch, p7 guard.
var fixedRoles = []string{Werewolf, Seer, Doctor, Villager, Werewolf, Witch, Guard}

func TestNightRules(t *testing.T) {
	params := engine.Params{"roles": fixedRoles, "max_cycles": 1}
	for _, tc := range []struct {
		name      string
		sc        script
		wantDead  []int
		wantSaves float64
		check     func(t *testing.T, e *episode, rt *engine.Runtime)
	}{
		{
			name: "kill_lands",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				if info.Kind == AskKill {
					return "KILL p4"
				}
				return ""
			},
			wantDead: []int{3},
		},
		{
			name: "doctor_saves",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				switch {
				case info.Kind == AskKill:
					return "KILL p4"
				case info.Kind == AskProtect && s.Role == Doctor:
					return "PROTECT p4"
				}
				return ""
			},
			wantSaves: 1,
		},
		{
			name: "guard_saves",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				switch {
				case info.Kind == AskKill:
					return "KILL p2"
				case info.Kind == AskProtect && s.Role == Guard:
					return "PROTECT p2"
				}
				return ""
			},
			wantSaves: 1,
		},
		{
			name: "witch_saves_and_cannot_poison_too",
			sc: func(s engine.Seat, info AskInfo, legal []string) string {
				switch info.Kind {
				case AskKill:
					return "KILL p3"
				case AskWitch:
					return "SAVE"
				}
				return ""
			},
			wantSaves: 1,
		},
		{
			name: "poison_ignores_protection",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				switch {
				case info.Kind == AskKill:
					return "NONE"
				case info.Kind == AskProtect:
					return "PROTECT p1"
				case info.Kind == AskWitch:
					return "POISON p1"
				}
				return ""
			},
			wantDead: []int{0},
		},
		{
			name: "no_consensus_no_kill",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				if info.Kind == AskKill {
					if s.Index == 0 {
						return "KILL p2"
					}
					return "KILL p4"
				}
				return ""
			},
			check: func(t *testing.T, e *episode, rt *engine.Runtime) {
				if e.noConsensus != 1 {
					t.Errorf("no-consensus nights: got %d, want 1", e.noConsensus)
				}
				rounds := 0
				for _, ev := range rt.Log().All() {
					if d, ok := ev.Data.(WolfChoices); ok {
						rounds++
						if d.Final != (d.Round == 2) || d.Victim != -1 {
							t.Errorf("round %+v", d)
						}
					}
				}
				if rounds != 2 {
					t.Errorf("rounds: got %d, want 2", rounds)
				}
			},
		},
		{
			name: "consensus_in_round_two",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				if info.Kind == AskKill {
					if s.Index == 0 && info.Round == 1 {
						return "KILL p2"
					}
					return "KILL p4"
				}
				return ""
			},
			wantDead: []int{3},
		},
		{
			name: "seer_result_is_private",
			sc: func(s engine.Seat, info AskInfo, _ []string) string {
				if info.Kind == AskInspect {
					return "INSPECT p5"
				}
				return ""
			},
			check: func(t *testing.T, e *episode, rt *engine.Runtime) {
				for s := range fixedRoles {
					found := false
					for _, ev := range rt.Log().View(s) {
						if d, ok := ev.Data.(InspectResult); ok {
							found = true
							if !d.Werewolf || d.Target != 4 || !strings.Contains(ev.Text, "p5 is a werewolf") {
								t.Errorf("result %+v %q", d, ev.Text)
							}
						}
					}
					if found != (s == 1) {
						t.Errorf("%s sees the inspection: %v", SeatName(s), found)
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, rt := runFixed(t, params, fixedRoles, tc.sc)
			var dead []int
			for _, el := range e.elims {
				if el.Phase == "night" {
					dead = append(dead, el.Seat)
				}
			}
			if !slices.Equal(dead, tc.wantDead) {
				t.Errorf("night deaths: got %v, want %v", dead, tc.wantDead)
			}
			if got := e.out.Metrics["saves"]; got != tc.wantSaves {
				t.Errorf("saves: got %v, want %v", got, tc.wantSaves)
			}
			if tc.check != nil {
				tc.check(t, e, rt)
			}
		})
	}
}

func TestGuardAndPotionLimits(t *testing.T) {
	var guardLegal, witchLegal [][]string
	runFixed(t, engine.Params{"roles": fixedRoles, "max_cycles": 3}, fixedRoles, func(s engine.Seat, info AskInfo, legal []string) string {
		switch {
		case info.Kind == AskProtect && s.Role == Guard:
			guardLegal = append(guardLegal, legal)
			return "PROTECT p7"
		case info.Kind == AskKill:
			return "KILL p4"
		case info.Kind == AskWitch:
			witchLegal = append(witchLegal, legal)
			return "SAVE"
		}
		return ""
	})
	if len(guardLegal) < 2 {
		t.Fatalf("guard asked %d times", len(guardLegal))
	}
	if !slices.Contains(guardLegal[0], "PROTECT p7") || slices.Contains(guardLegal[1], "PROTECT p7") {
		t.Errorf("guard legal moves: night 1 %v, night 2 %v; want p7 only on night 1", guardLegal[0], guardLegal[1])
	}
	if len(witchLegal) < 2 || !slices.Contains(witchLegal[0], VerbSave) || slices.Contains(witchLegal[1], VerbSave) {
		t.Errorf("witch legal moves %v: want SAVE on night 1 only", witchLegal)
	}
}

func TestDayRules(t *testing.T) {
	roles := []string{Werewolf, Seer, Doctor, Villager, Villager}
	for _, tc := range []struct {
		name       string
		votes      map[int]string
		wantOut    int
		wantWinner string
	}{
		{"tie_eliminates_nobody", map[int]string{0: "VOTE p2", 1: "VOTE p1", 2: "VOTE p1", 3: "VOTE p2"}, -1, "draw"},
		{"most_votes_out", map[int]string{0: "VOTE p2", 1: "VOTE p1", 2: "VOTE p1", 3: "VOTE p1"}, 0, TeamVillagers},
		{"abstentions", map[int]string{0: "VOTE p2"}, 1, "draw"},
		{"parity_after_vote", map[int]string{0: "VOTE p2", 3: "VOTE p2", 4: "VOTE p2"}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := runFixed(t, engine.Params{"roles": roles, "max_cycles": 1}, roles, func(s engine.Seat, info AskInfo, _ []string) string {
				if info.Kind == AskVote {
					return tc.votes[s.Index]
				}
				return ""
			})
			out := -1
			for _, el := range e.elims {
				if el.Phase == "day" {
					out = el.Seat
				}
			}
			if out != tc.wantOut {
				t.Errorf("eliminated: got %d, want %d", out, tc.wantOut)
			}
			if tc.wantWinner != "" && e.winner != tc.wantWinner {
				t.Errorf("winner: got %s, want %s", e.winner, tc.wantWinner)
			}
		})
	}
	// Werewolves reach parity: 1 wolf against 1 villager after a night
	// kill and a day elimination in a 4-player game.
	roles4 := []string{Werewolf, Seer, Villager, Villager}
	e, _ := runFixed(t, engine.Params{"roles": roles4}, roles4, func(s engine.Seat, info AskInfo, _ []string) string {
		switch info.Kind {
		case AskKill:
			return "KILL p2"
		case AskVote:
			if s.Index != 2 {
				return "VOTE p3"
			}
		}
		return ""
	})
	if e.winner != TeamWerewolves || e.endCycle != 1 {
		t.Errorf("got winner %s after %d cycles, want werewolves after 1", e.winner, e.endCycle)
	}
	if got := e.out.Rewards; got[0] != 1 || got[1] != -1 || got[2] != -1 || got[3] != -1 {
		t.Errorf("rewards: got %v, want [1 -1 -1 -1] (eliminations in the final cycle are not discounted)", got)
	}
}
