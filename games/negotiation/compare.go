package negotiation

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// RoleScore is one policy's mean reward in one role.
type RoleScore struct {
	Role       string
	Mean       float64
	Agreement  float64
	Episodes   int
	Opponent   string
	Policy     string
	totalAgree float64
}

// HeadToHead plays policy x against policy y in both seatings, episodes
// times each (seeds seed0, seed0+1, …), and returns the mean reward of
// each policy in each role: Scores[policy][role index].
type HeadToHead struct {
	Game     string
	Policies [2]string
	Roles    []string
	Scores   [2][]RoleScore
}

// PlayHeadToHead runs the comparison.
func PlayHeadToHead(ctx context.Context, g engine.Game, p engine.Params, x, y string, episodes int, seed0 uint64) (HeadToHead, error) {
	specs, err := g.Seats(p)
	if err != nil {
		return HeadToHead{}, err
	}
	h := HeadToHead{Game: g.ID(), Policies: [2]string{x, y}}
	for _, s := range specs {
		h.Roles = append(h.Roles, s.Role)
	}
	for pi := range 2 {
		h.Scores[pi] = make([]RoleScore, len(specs))
		for r := range specs {
			h.Scores[pi][r] = RoleScore{Role: h.Roles[r], Policy: h.Policies[pi], Opponent: h.Policies[1-pi]}
		}
	}
	for order := range 2 {
		names := []string{x, y}
		if order == 1 {
			names = []string{y, x}
		}
		for i := range episodes {
			seed := seed0 + uint64(i)
			cast, err := engine.ScriptedCast(g, names, seed)
			if err != nil {
				return h, err
			}
			rec, err := engine.Play(ctx, g, seed, p, cast, engine.DefaultOptions(), nil)
			if err != nil {
				return h, err
			}
			agree := 0.0
			if rec.Outcome.Result == string(StatusDeal) {
				agree = 1
			}
			for seat, r := range rec.Outcome.Rewards {
				pi := seat
				if order == 1 {
					pi = 1 - seat
				}
				sc := &h.Scores[pi][seat]
				sc.Mean += r
				sc.totalAgree += agree
				sc.Episodes++
			}
		}
	}
	for pi := range 2 {
		for r := range h.Scores[pi] {
			sc := &h.Scores[pi][r]
			if sc.Episodes > 0 {
				sc.Mean /= float64(sc.Episodes)
				sc.Agreement = sc.totalAgree / float64(sc.Episodes)
			}
		}
	}
	return h, nil
}

// Overall is a policy's mean reward over both roles.
func (h HeadToHead) Overall(pi int) float64 {
	s, n := 0.0, 0
	for _, sc := range h.Scores[pi] {
		s += sc.Mean * float64(sc.Episodes)
		n += sc.Episodes
	}
	return s / float64(max(1, n))
}

// WriteTable writes a Markdown table: one row per role with each policy's
// mean reward in that role (against the other policy) and the agreement
// rate of those games.
func (h HeadToHead) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "| %s | role | %s | %s | agreement (%s in role) |\n", h.Game, h.Policies[0], h.Policies[1], h.Policies[0])
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", 5))
	for r, role := range h.Roles {
		fmt.Fprintf(w, "| | %s | %.3f | %.3f | %.2f |\n", role, h.Scores[0][r].Mean, h.Scores[1][r].Mean, h.Scores[0][r].Agreement)
	}
	fmt.Fprintf(w, "| | all | %.3f | %.3f | |\n", h.Overall(0), h.Overall(1))
}
