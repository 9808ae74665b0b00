package werewolf

import (
	"fmt"
	"maps"
	"strings"
)

// roleBriefs describe each role's powers to its holder.
var roleBriefs = map[string]string{
	Werewolf: `You are a WEREWOLF (team: werewolves). %s
Each night the living werewolves first talk on a private channel that only werewolves can read, in seat order, one line each. Then every living werewolf names a victim at the same time: reply KILL pN (a living non-werewolf) or NONE. The victim is attacked only if every living werewolf names the same player in the same round; you get up to %d rounds per night and see each other's choices after every round. With no agreement nobody is attacked. By day, hide what you are: the villagers will try to vote you out.`,
	Seer: `You are the SEER (team: villagers).
Each night you inspect one living player: reply INSPECT pN or PASS. Only you learn whether that player is a werewolf. Use what you learn by day, but beware: if the werewolves find out who you are, they will attack you.`,
	Doctor: `You are the DOCTOR (team: villagers).
Each night you protect one living player, yourself included: reply PROTECT pN or PASS. If the werewolves attack the player you protect, that player survives. You may protect the same player on several nights.`,
	Guard: `You are the GUARD (team: villagers).
Each night you guard one living player, yourself included: reply PROTECT pN or PASS. If the werewolves attack the player you guard, that player survives. You may not guard the same player two nights in a row (passing resets this).`,
	Witch: `You are the WITCH (team: villagers).
You have two potions, each usable once per game: a healing potion and a poison. Each night while you still hold a potion, after the werewolves choose, you privately learn whom they attacked, and you may use at most one potion: SAVE heals the attacked player, POISON pN kills a living player (no protection stops the poison), PASS does nothing.`,
	Villager: `You are a VILLAGER (team: villagers).
You have no night action. Find the werewolves by listening, speaking and voting.`,
}

// briefing is seat's private instructions: the rules, its role and private
// knowledge, and the move formats.
func (e *episode) briefing(seat int) string {
	n := len(e.seats)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	role := e.roles[seat]
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s in a game of Werewolf with %d players: %s.\n", SeatName(seat), n, names(all))
	fmt.Fprintf(&b, "Roles in this game: %s. Roles are dealt secretly and stay secret, even after a player dies; only the werewolves know each other.\n\n", e.p.Roles)
	text := roleBriefs[role]
	if role == Werewolf {
		var pack []int
		for i, r := range e.roles {
			if r == Werewolf && i != seat {
				pack = append(pack, i)
			}
		}
		mates := "You are the only werewolf."
		if len(pack) > 0 {
			mates = fmt.Sprintf("Your fellow werewolves: %s.", names(pack))
		}
		text = fmt.Sprintf(text, mates, e.p.KillRounds)
	}
	b.WriteString(text)
	fmt.Fprintf(&b, `

How a cycle goes:
- Night: the werewolves choose a victim while the seer, the doctor and the guard (when in the game) act at the same time; then the witch (when in the game) may use a potion.
- Day: the deaths of the night are announced without roles. Then every living player speaks once, in seat order starting from a seat that moves one place each day (day 1 starts at p1, day 2 at p2, …). Then everyone votes at the same time: reply VOTE pN or ABSTAIN. All votes are made public. The player with the most votes is eliminated, without revealing their role; a tie eliminates nobody.
The villagers win as soon as no werewolf is left. The werewolves win as soon as the living werewolves are at least as many as the living others. After %d cycles without a winner the game is a draw.

Your reward: +1 if your team wins, -1 if it loses, 0 for a draw; if you are eliminated, it is multiplied by %g for each cycle between your elimination and the end of the game.

Move formats: when asked to choose, reply with exactly one of the legal moves listed in the question (for example "VOTE p3" or "ABSTAIN"). When asked to speak, reply with one line of plain text of at most %d characters. A reply that breaks the format is rejected and you are asked again; after repeated failures the inert move (no target, abstain, or "%s") is applied.`,
		e.p.MaxCycles, e.p.Gamma, e.p.SpeechMaxChars, PassSpeech)
	return b.String()
}

func (e *episode) briefingData(seat int) Briefing {
	b := Briefing{
		Seat: seat, Name: SeatName(seat), Role: e.roles[seat], Team: teamOf(e.roles[seat]),
		Players: len(e.seats), Roles: maps.Clone(e.p.Roles), MaxCycles: e.p.MaxCycles,
		SpeechMax: e.p.SpeechMaxChars,
	}
	if e.roles[seat] == Werewolf {
		for i, r := range e.roles {
			if r == Werewolf {
				b.Werewolves = append(b.Werewolves, i)
			}
		}
	}
	return b
}
