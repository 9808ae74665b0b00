// Package werewolf is the Werewolf environment (env id werewolf_v1): hidden
// roles, a werewolf-only team channel, simultaneous night actions and day
// votes, driven through the engine's event runtime.
//
// The rules follow docs/mission.md §4; docs/werewolf.md documents every choice the
// sources left open (consensus, speaking order, night resolution, reward
// discounting, shaping, probes) and how to reproduce the reported numbers.
//
// Roles and teams are dealt from the episode seed into Seat.Role and
// Seat.Team. They are never broadcast: deaths are announced without roles,
// the werewolves' channel uses engine.TeamAudience(TeamWerewolves), and
// every night result (inspection, the witch's news) goes to its owner only.
package werewolf
