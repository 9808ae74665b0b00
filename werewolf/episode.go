package werewolf

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// episode is one game's mutable state.
type episode struct {
	p     Params
	roles []string
	seats []engine.Seat

	alive     []bool
	elimCycle []int // cycle of elimination; 0 while alive
	elims     []Elimination
	shaping   []float64

	saveLeft, poisonLeft bool
	guardLast            int // the guard's target last night, -1 for none

	winner   string
	endCycle int
	out      engine.Outcome

	// probes
	villagerVotes, villagerCorrect int
	wolfClaims                     int
	saves, wolfKills, noConsensus  int
	seerFinds, ties, invalid, defs int
}

func newEpisode(p Params, roles []string) *episode {
	n := len(roles)
	e := &episode{
		p: p, roles: roles, seats: make([]engine.Seat, n),
		alive: make([]bool, n), elimCycle: make([]int, n), shaping: make([]float64, n),
		saveLeft: true, poisonLeft: true, guardLast: -1,
	}
	for i, r := range roles {
		e.seats[i] = engine.Seat{Index: i, Name: SeatName(i), Role: r, Team: teamOf(r)}
		e.alive[i] = true
	}
	return e
}

// Seats implements engine.Episode.
func (e *episode) Seats() []engine.Seat { return slices.Clone(e.seats) }

// Scenario implements engine.Episode.
func (e *episode) Scenario() any {
	teams := make([]string, len(e.roles))
	for i, r := range e.roles {
		teams[i] = teamOf(r)
	}
	return Scenario{Params: e.p, Roles: slices.Clone(e.roles), Teams: teams}
}

// Outcome implements engine.Episode.
func (e *episode) Outcome() engine.Outcome { return e.out }

// Run implements engine.Episode.
func (e *episode) Run(ctx context.Context, rt *engine.Runtime) error {
	for i := range e.seats {
		rt.Brief(i, e.briefing(i), e.briefingData(i))
	}
	for c := 1; c <= e.p.MaxCycles && e.winner == ""; c++ {
		e.endCycle = c
		if err := e.night(ctx, rt, c); err != nil {
			return err
		}
		if e.winner != "" {
			break
		}
		if err := e.day(ctx, rt, c); err != nil {
			return err
		}
	}
	if e.winner == "" {
		e.winner = "draw"
	}
	text := fmt.Sprintf("The game is over after %d cycles: ", e.endCycle)
	switch e.winner {
	case TeamWerewolves:
		text += "the werewolves win."
	case TeamVillagers:
		text += "the villagers win."
	default:
		text += "nobody wins (draw)."
	}
	rt.Broadcast(engine.Everyone(), -1, text, GameOver{Cycle: e.endCycle, Winner: e.winner})
	e.finish()
	return nil
}

// living lists the living seats in seat order.
func (e *episode) living() []int {
	var out []int
	for i, a := range e.alive {
		if a {
			out = append(out, i)
		}
	}
	return out
}

// livingWolves lists the living werewolves in seat order.
func (e *episode) livingWolves() []int {
	var out []int
	for _, i := range e.living() {
		if e.roles[i] == Werewolf {
			out = append(out, i)
		}
	}
	return out
}

// livingRole is the living seat with role r, or -1 (special roles are
// unique).
func (e *episode) livingRole(r string) int {
	for _, i := range e.living() {
		if e.roles[i] == r {
			return i
		}
	}
	return -1
}

func names(seats []int) string {
	if len(seats) == 0 {
		return "nobody"
	}
	s := make([]string, len(seats))
	for i, x := range seats {
		s[i] = SeatName(x)
	}
	return strings.Join(s, ", ")
}

func without(seats []int, x int) []int {
	return slices.DeleteFunc(slices.Clone(seats), func(s int) bool { return s == x })
}

// note counts invalid replies and defaults for the probes.
func (e *episode) note(as ...engine.Answer) {
	for _, a := range as {
		e.invalid += a.Invalid
		if a.Defaulted {
			e.defs++
		}
	}
}

// choiceQuestion builds a finite target question: one "<verb> pN" per
// target plus the extra moves, with its grammar and parser.
func (e *episode) choiceQuestion(seat int, text string, info AskInfo, verb string, targets []int, extra ...string) engine.Question {
	var legal []string
	for _, t := range targets {
		legal = append(legal, targetMove(verb, t))
	}
	legal = append(legal, extra...)
	return engine.Question{
		Seat: seat, Text: text, Legal: legal, Grammar: choiceGrammar(legal), Data: info,
		Parse: parseChoice(legal, len(e.seats)), Default: extra[len(extra)-1],
	}
}

func (e *episode) speechQuestion(seat int, text string, info AskInfo) engine.Question {
	return engine.Question{
		Seat: seat, Text: text, Grammar: speechGrammar, Data: info,
		Parse: parseSpeech(e.p.SpeechMaxChars), Default: PassSpeech,
	}
}

// kill marks seat dead.
func (e *episode) kill(seat, cycle int, phase, cause string) {
	e.alive[seat] = false
	e.elimCycle[seat] = cycle
	e.elims = append(e.elims, Elimination{
		SeatRole: SeatRole{Seat: seat, Name: SeatName(seat), Role: e.roles[seat]},
		Cycle:    cycle, Phase: phase, Cause: cause,
	})
}

// checkWin sets the winner after deaths: no werewolf left → villagers;
// werewolves at least as many as the others → werewolves.
func (e *episode) checkWin() {
	wolves := len(e.livingWolves())
	others := len(e.living()) - wolves
	switch {
	case wolves == 0:
		e.winner = TeamVillagers
	case wolves >= others:
		e.winner = TeamWerewolves
	}
}

// night plays night c and the dawn announcement.
func (e *episode) night(ctx context.Context, rt *engine.Runtime, c int) error {
	living := e.living()
	rt.Phase(fmt.Sprintf("Night %d falls. Living players: %s.", c, names(living)), PhaseInfo{Cycle: c, Phase: "night", Living: living})
	wolves := e.livingWolves()
	var prey []int // living non-werewolves
	for _, s := range living {
		if e.roles[s] != Werewolf {
			prey = append(prey, s)
		}
	}
	max := e.p.SpeechMaxChars

	// The pack talks in seat order on its own channel; a lone werewolf has
	// nobody to talk to.
	if len(wolves) >= 2 {
		for _, w := range wolves {
			q := e.speechQuestion(w, fmt.Sprintf(
				"Night %d, werewolf channel (only werewolves read it). Living werewolves: %s. Living others: %s. Say one line of plain text to your pack (at most %d characters).",
				c, names(wolves), names(prey), max), AskInfo{Kind: AskWolfChat, Cycle: c, Living: living})
			a, err := rt.Ask(ctx, q)
			if err != nil {
				return err
			}
			e.note(a)
			text := a.Move.(Speech).Text
			rt.Broadcast(engine.TeamAudience(TeamWerewolves), w, fmt.Sprintf("%s (werewolf channel): %s", SeatName(w), text), WolfChat{Cycle: c, Seat: w, Text: text})
		}
	}

	killQ := func(w, round int) engine.Question {
		return e.choiceQuestion(w, fmt.Sprintf(
			"Night %d, round %d of %d: choose tonight's victim. Reply KILL pN naming a living non-werewolf (%s), or NONE. The victim dies only if every living werewolf names the same player in the same round.",
			c, round, e.p.KillRounds, names(prey)), AskInfo{Kind: AskKill, Cycle: c, Round: round, Living: living}, VerbKill, prey, VerbNone)
	}

	// Round 1 of the pack's choice and the other night roles, all at once.
	var qs []engine.Question
	for _, w := range wolves {
		qs = append(qs, killQ(w, 1))
	}
	seer, doctor, guard := e.livingRole(Seer), e.livingRole(Doctor), e.livingRole(Guard)
	if seer >= 0 {
		qs = append(qs, e.choiceQuestion(seer, fmt.Sprintf(
			"Night %d: choose a player to inspect. Reply INSPECT pN (one of %s) or PASS. Only you will learn whether that player is a werewolf.",
			c, names(without(living, seer))), AskInfo{Kind: AskInspect, Cycle: c, Living: living}, VerbInspect, without(living, seer), VerbPass))
	}
	if doctor >= 0 {
		qs = append(qs, e.choiceQuestion(doctor, fmt.Sprintf(
			"Night %d: choose a player to protect from the werewolves tonight, yourself included. Reply PROTECT pN (one of %s) or PASS.",
			c, names(living)), AskInfo{Kind: AskProtect, Cycle: c, Living: living}, VerbProtect, living, VerbPass))
	}
	if guard >= 0 {
		targets, note := living, ""
		if e.guardLast >= 0 {
			targets = without(living, e.guardLast)
			note = fmt.Sprintf(" You guarded %s last night, so you may not guard them again tonight.", SeatName(e.guardLast))
		}
		qs = append(qs, e.choiceQuestion(guard, fmt.Sprintf(
			"Night %d: choose a player to guard from the werewolves tonight, yourself included.%s Reply PROTECT pN (one of %s) or PASS.",
			c, note, names(targets)), AskInfo{Kind: AskProtect, Cycle: c, Living: living}, VerbProtect, targets, VerbPass))
	}
	answers, err := rt.AskAll(ctx, qs)
	if err != nil {
		return err
	}
	e.note(answers...)
	doctorTarget, guardTarget := -1, -1
	for _, a := range answers[len(wolves):] {
		ch := a.Move.(Choice)
		switch e.roles[a.Seat] {
		case Seer:
			if ch.Target >= 0 {
				wolf := e.roles[ch.Target] == Werewolf
				verdict := "is not a werewolf"
				if wolf {
					verdict = "is a werewolf"
					e.seerFinds++
					e.shaping[a.Seat] += e.p.Shaping.SeerFind
				}
				rt.Broadcast(engine.Only(a.Seat), a.Seat, fmt.Sprintf("Your inspection, night %d: %s %s.", c, SeatName(ch.Target), verdict),
					InspectResult{Cycle: c, Seer: a.Seat, Target: ch.Target, Werewolf: wolf})
			}
		case Doctor:
			doctorTarget = ch.Target
		case Guard:
			guardTarget = ch.Target
			e.guardLast = ch.Target
		}
	}
	if guard < 0 {
		e.guardLast = -1
	}

	// The pack's rounds: consensus is every living werewolf naming the same
	// victim in one round.
	victim := -1
	wolfAnswers := answers[:len(wolves)]
	for round := 1; len(wolves) > 0; round++ {
		if round > 1 {
			qs = qs[:0]
			for _, w := range wolves {
				qs = append(qs, killQ(w, round))
			}
			if wolfAnswers, err = rt.AskAll(ctx, qs); err != nil {
				return err
			}
			e.note(wolfAnswers...)
		}
		choices := make([]SeatChoice, len(wolfAnswers))
		shown := make([]string, len(wolfAnswers))
		for i, a := range wolfAnswers {
			choices[i] = SeatChoice{Seat: a.Seat, Choice: a.Move.(Choice)}
			shown[i] = SeatName(a.Seat) + ": " + choices[i].Choice.String()
		}
		victim = consensus(choices)
		final := victim >= 0 || round >= e.p.KillRounds
		text := fmt.Sprintf("Night %d, round %d choices: %s. ", c, round, strings.Join(shown, "; "))
		switch {
		case victim >= 0:
			text += fmt.Sprintf("The pack agrees: %s is attacked tonight.", SeatName(victim))
		case final:
			text += "No agreement: nobody is attacked tonight."
		default:
			text += "No agreement yet: choose again."
		}
		rt.Broadcast(engine.TeamAudience(TeamWerewolves), -1, text, WolfChoices{Cycle: c, Round: round, Choices: choices, Victim: victim, Final: final})
		if final {
			break
		}
	}
	if len(wolves) > 0 && victim < 0 {
		e.noConsensus++
	}

	// The witch hears whom the pack attacked and may use one potion.
	saved, poisoned := false, -1
	if witch := e.livingRole(Witch); witch >= 0 && (e.saveLeft || e.poisonLeft) {
		news := "Tonight the werewolves attacked nobody."
		if victim >= 0 {
			news = fmt.Sprintf("Tonight the werewolves attacked %s.", SeatName(victim))
		}
		rt.Broadcast(engine.Only(witch), witch, news, WitchInfo{Cycle: c, Witch: witch, Victim: victim})
		var extra []string
		var potions []string
		if e.saveLeft {
			potions = append(potions, "healing")
			if victim >= 0 {
				extra = append(extra, VerbSave)
			}
		}
		var targets []int
		if e.poisonLeft {
			potions = append(potions, "poison")
			targets = without(living, witch)
		}
		extra = append(extra, VerbPass)
		q := e.choiceQuestion(witch, "", AskInfo{Kind: AskWitch, Cycle: c, Living: living}, VerbPoison, targets, extra...)
		q.Text = fmt.Sprintf(
			"Night %d: %s Potions left: %s. You may use at most one tonight: SAVE heals the attacked player, POISON pN kills a living player whatever protects them, PASS does nothing. Legal replies: %s.",
			c, news, strings.Join(potions, ", "), strings.Join(q.Legal, ", "))
		a, err := rt.Ask(ctx, q)
		if err != nil {
			return err
		}
		e.note(a)
		switch ch := a.Move.(Choice); ch.Verb {
		case VerbSave:
			saved, e.saveLeft = true, false
		case VerbPoison:
			poisoned, e.poisonLeft = ch.Target, false
		}
	}

	// Resolution: protections and the healing potion stop the pack's
	// attack; nothing stops the poison.
	var dead []int
	if victim >= 0 {
		if victim == doctorTarget || victim == guardTarget || saved {
			e.saves++
			if doctor >= 0 && doctorTarget == victim {
				e.shaping[doctor] += e.p.Shaping.Save
			}
			if guard >= 0 && guardTarget == victim {
				e.shaping[guard] += e.p.Shaping.Save
			}
			if saved {
				e.shaping[e.livingRole(Witch)] += e.p.Shaping.Save
			}
		} else {
			e.wolfKills++
			for _, w := range wolves {
				e.shaping[w] += e.p.Shaping.Kill
			}
			e.kill(victim, c, "night", "werewolves")
			dead = append(dead, victim)
		}
	}
	if poisoned >= 0 && e.alive[poisoned] {
		e.kill(poisoned, c, "night", "poison")
		dead = append(dead, poisoned)
	}
	slices.Sort(dead)
	living = e.living()
	rt.Phase(fmt.Sprintf("Day %d breaks. Living players: %s.", c, names(living)), PhaseInfo{Cycle: c, Phase: "day", Living: living})
	news := "Nobody died last night."
	if len(dead) > 0 {
		news = fmt.Sprintf("Found dead at dawn: %s. Their roles stay secret.", names(dead))
	}
	rt.Broadcast(engine.Everyone(), -1, news, Deaths{Cycle: c, Seats: dead})
	if len(dead) > 0 {
		e.checkWin()
	}
	return nil
}

// consensus is the victim every choice names with KILL, or -1.
func consensus(choices []SeatChoice) int {
	if len(choices) == 0 {
		return -1
	}
	v := choices[0].Choice
	for _, c := range choices {
		if c.Choice.Verb != VerbKill || c.Choice.Target != v.Target {
			return -1
		}
	}
	return v.Target
}

// speakingOrder is the living seats in seat order, starting from the first
// living seat at or after seat (c−1) mod n, so the opening speaker moves
// one seat each day.
func (e *episode) speakingOrder(c int) []int {
	n := len(e.seats)
	start := (c - 1) % n
	living := e.living()
	slices.SortStableFunc(living, func(a, b int) int { return (a-start+n)%n - (b-start+n)%n })
	return living
}

// day plays the speeches and the vote of day c.
func (e *episode) day(ctx context.Context, rt *engine.Runtime, c int) error {
	living := e.living()
	for _, s := range e.speakingOrder(c) {
		q := e.speechQuestion(s, fmt.Sprintf(
			"Day %d: your turn to speak to everyone (living: %s). Reply with one line of plain text, at most %d characters.",
			c, names(living), e.p.SpeechMaxChars), AskInfo{Kind: AskSpeech, Cycle: c, Living: living})
		a, err := rt.Ask(ctx, q)
		if err != nil {
			return err
		}
		e.note(a)
		text := a.Move.(Speech).Text
		if e.roles[s] == Werewolf {
			if r := claimedRole(text); r != "" && r != Werewolf {
				e.wolfClaims++
			}
		}
		rt.Broadcast(engine.Everyone(), s, fmt.Sprintf("%s says: %s", SeatName(s), text), SpeechEvent{Cycle: c, Seat: s, Text: text})
	}

	rt.Phase(fmt.Sprintf("Day %d vote. Living players: %s.", c, names(living)), PhaseInfo{Cycle: c, Phase: "vote", Living: living})
	qs := make([]engine.Question, len(living))
	for i, s := range living {
		others := without(living, s)
		qs[i] = e.choiceQuestion(s, fmt.Sprintf(
			"Day %d vote: everyone votes at the same time. Reply VOTE pN (one of %s) or ABSTAIN. The player with the most votes is eliminated; a tie eliminates nobody.",
			c, names(others)), AskInfo{Kind: AskVote, Cycle: c, Living: living}, VerbVote, others, VerbAbstain)
	}
	answers, err := rt.AskAll(ctx, qs)
	if err != nil {
		return err
	}
	e.note(answers...)
	votes := make([]SeatChoice, len(answers))
	shown := make([]string, len(answers))
	for i, a := range answers {
		ch := a.Move.(Choice)
		votes[i] = SeatChoice{Seat: a.Seat, Choice: ch}
		if ch.Target < 0 {
			shown[i] = SeatName(a.Seat) + " abstains"
		} else {
			shown[i] = SeatName(a.Seat) + " → " + SeatName(ch.Target)
		}
		if e.roles[a.Seat] != Werewolf && ch.Target >= 0 {
			e.villagerVotes++
			if e.roles[ch.Target] == Werewolf {
				e.villagerCorrect++
				e.shaping[a.Seat] += e.p.Shaping.CorrectVote
			}
		}
	}
	out, top, tie := tally(votes)
	text := "Votes: " + strings.Join(shown, ", ") + ". "
	switch {
	case out >= 0:
		text += fmt.Sprintf("%s is eliminated with %d votes. Their role stays secret.", SeatName(out), top)
	case tie:
		e.ties++
		text += fmt.Sprintf("Tie at %d votes: nobody is eliminated.", top)
	default:
		text += "Nobody received a vote: nobody is eliminated."
	}
	rt.Broadcast(engine.Everyone(), -1, text, VoteResult{Cycle: c, Votes: votes, Eliminated: out, Tie: tie})
	if out >= 0 {
		e.kill(out, c, "day", "vote")
		e.checkWin()
	}
	return nil
}

// tally returns the seat with strictly the most votes (or -1), that
// number, and whether several seats share the most.
func tally(votes []SeatChoice) (out, top int, tie bool) {
	count := map[int]int{}
	for _, v := range votes {
		if v.Choice.Verb == VerbVote && v.Choice.Target >= 0 {
			count[v.Choice.Target]++
		}
	}
	out = -1
	for _, v := range votes { // vote order, not map order
		t := v.Choice.Target
		if v.Choice.Verb != VerbVote || t < 0 {
			continue
		}
		switch n := count[t]; {
		case n > top:
			out, top, tie = t, n, false
		case n == top && t != out:
			tie = true
		}
	}
	if tie {
		out = -1
	}
	return out, top, tie
}

// Reward returns a seat's team reward before shaping: +1 for the winning
// team, −1 for the losing one, 0 for a draw, times gamma^(end − elim) for a
// seat eliminated in cycle elim (0 = survived).
func Reward(team, winner string, gamma float64, end, elim int) float64 {
	if winner != TeamWerewolves && winner != TeamVillagers {
		return 0
	}
	r := -1.0
	if team == winner {
		r = 1
	}
	if elim > 0 {
		r *= math.Pow(gamma, float64(end-elim))
	}
	return r
}

// finish computes the outcome.
func (e *episode) finish() {
	n := len(e.seats)
	rewards := make([]float64, n)
	for i := range rewards {
		r := Reward(teamOf(e.roles[i]), e.winner, e.p.Gamma, e.endCycle, e.elimCycle[i])
		if e.p.Shaping.Enabled {
			r = min(max(r+e.shaping[i], -1), 1)
		}
		rewards[i] = r
	}
	var living []SeatRole
	for _, s := range e.living() {
		living = append(living, SeatRole{Seat: s, Name: SeatName(s), Role: e.roles[s]})
	}
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	m := map[string]float64{
		"werewolves_win":         b(e.winner == TeamWerewolves),
		"villagers_win":          b(e.winner == TeamVillagers),
		"draw":                   b(e.winner == "draw"),
		"cycles":                 float64(e.endCycle),
		"villager_votes":         float64(e.villagerVotes),
		"villager_correct_votes": float64(e.villagerCorrect),
		"wolf_role_claims":       float64(e.wolfClaims),
		"wolf_claimed_role":      b(e.wolfClaims > 0),
		"saves":                  float64(e.saves),
		"wolf_kills":             float64(e.wolfKills),
		"no_consensus_nights":    float64(e.noConsensus),
		"seer_finds":             float64(e.seerFinds),
		"tied_votes":             float64(e.ties),
		"invalid_replies":        float64(e.invalid),
		"defaulted_moves":        float64(e.defs),
	}
	if e.villagerVotes > 0 {
		m["villager_vote_accuracy"] = float64(e.villagerCorrect) / float64(e.villagerVotes)
	}
	if i := slices.Index(e.roles, Seer); i >= 0 {
		m["seer_survived"] = b(e.alive[i])
	}
	e.out = engine.Outcome{
		Rewards: rewards,
		Result:  e.winner,
		Terms:   Terms{Winner: e.winner, Cycles: e.endCycle, Living: living, Eliminations: slices.Clone(e.elims)},
		Metrics: m,
	}
}
