package werewolf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
)

// knowledge is what a seat can reconstruct from its own view. Scripted
// agents rebuild it at every turn, so they hold no state the log does not;
// what the question itself says (the witch's potions, the guard's ban) they
// read from its legal moves.
type knowledge struct {
	me, n     int
	role      string
	pack      []int // the werewolves, for a werewolf
	speechMax int
	alive     []bool
	speeches  []SpeechEvent
	votes     []VoteResult
	findings  map[int]bool // seer: inspected seat → werewolf?
	chat      []WolfChat
	rounds    []WolfChoices
}

func readView(seat engine.Seat, view []engine.Event) *knowledge {
	k := &knowledge{me: seat.Index, role: seat.Role, speechMax: 400, findings: map[int]bool{}}
	for _, ev := range view {
		switch d := ev.Data.(type) {
		case Briefing:
			k.n, k.pack, k.speechMax = d.Players, d.Werewolves, d.SpeechMax
			k.alive = make([]bool, d.Players)
			for i := range k.alive {
				k.alive[i] = true
			}
		case PhaseInfo:
			for i := range k.alive {
				k.alive[i] = slices.Contains(d.Living, i)
			}
		case Deaths:
			for _, s := range d.Seats {
				k.alive[s] = false
			}
		case VoteResult:
			if d.Eliminated >= 0 {
				k.alive[d.Eliminated] = false
			}
			k.votes = append(k.votes, d)
		case SpeechEvent:
			k.speeches = append(k.speeches, d)
		case InspectResult:
			k.findings[d.Target] = d.Werewolf
		case WolfChat:
			k.chat = append(k.chat, d)
		case WolfChoices:
			k.rounds = append(k.rounds, d)
		}
	}
	return k
}

func (k *knowledge) isWolf(s int) bool { return slices.Contains(k.pack, s) }

// seerClaim is a public claim to be the seer.
type seerClaim struct {
	seat      int
	cycle     int
	accused   []int
	innocents []int
}

// claims lists the seer claims in speaking order, one per claimant (its
// latest speech's findings accumulate).
func (k *knowledge) claims() []seerClaim {
	var out []seerClaim
	for _, sp := range k.speeches {
		if claimedRole(sp.Text) != Seer {
			continue
		}
		i := slices.IndexFunc(out, func(c seerClaim) bool { return c.seat == sp.Seat })
		if i < 0 {
			out = append(out, seerClaim{seat: sp.Seat, cycle: sp.Cycle})
			i = len(out) - 1
		}
		out[i].accused = append(out[i].accused, namesIn(reFinding, sp.Text, k.n)...)
		out[i].innocents = append(out[i].innocents, namesIn(reInnocent, sp.Text, k.n)...)
	}
	return out
}

// suspicion scores every seat from public speeches: the first seer
// claimant's findings weigh 3, a later counter-claimant is suspect (2) and
// its findings weigh 1, and today's accusations weigh 1. A credible
// "not a werewolf" clears a seat.
func (k *knowledge) suspicion(cycle int) []float64 {
	score := make([]float64, k.n)
	cleared := make([]bool, k.n)
	for i, c := range k.claims() {
		w := 1.0
		if i == 0 {
			w = 3
			for _, s := range c.innocents {
				cleared[s] = true
			}
		} else {
			score[c.seat] += 2
		}
		for _, s := range c.accused {
			if s != c.seat {
				score[s] += w
			}
		}
	}
	for _, sp := range k.speeches {
		if sp.Cycle != cycle {
			continue
		}
		for _, s := range namesIn(reAccusation, sp.Text, k.n) {
			if s != sp.Seat {
				score[s]++
			}
		}
	}
	// Voting against the credible seer after its claim is suspect.
	if c := k.claims(); len(c) > 0 {
		for _, v := range k.votes {
			if v.Cycle < c[0].cycle {
				continue
			}
			for _, x := range v.Votes {
				if x.Choice.Target == c[0].seat {
					score[x.Seat] += 1.5
				}
			}
		}
	}
	for i := range score {
		if cleared[i] {
			score[i] = -1
		}
	}
	return score
}

// argmax returns the candidate with the highest score above floor (lowest
// seat on ties, so that every agent reading the same view agrees), or -1.
func argmax(score []float64, candidates []int, floor float64) int {
	best := -1
	for _, c := range candidates {
		if score[c] > floor && (best < 0 || score[c] > score[best]) {
			best = c
		}
	}
	return best
}

func (k *knowledge) living(pred func(int) bool) []int {
	var out []int
	for i, a := range k.alive {
		if a && (pred == nil || pred(i)) {
			out = append(out, i)
		}
	}
	return out
}

// pick returns the legal move "<verb> pN" for target, or fallback when it
// is not legal.
func pick(legal []string, verb string, target int, fallback string) string {
	if target >= 0 {
		if m := targetMove(verb, target); slices.Contains(legal, m) {
			return m
		}
	}
	return fallback
}

// legalTargets lists the seats of the legal "<verb> pN" moves.
func legalTargets(legal []string, verb string, n int) []int {
	var out []int
	for _, m := range legal {
		if v, name, ok := strings.Cut(m, " "); ok && v == verb {
			if s := seatIndex(name, n); s >= 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

// heuristic is the default scripted policy.
type heuristic struct {
	seat engine.Seat
	rng  *rand.Rand
}

func newHeuristic(s engine.Seat, seed uint64) *heuristic {
	return &heuristic{seat: s, rng: rand.New(rand.NewPCG(seed, 0x6865757269737469))}
}

// Act implements engine.Agent.
func (h *heuristic) Act(_ context.Context, t engine.Turn) (engine.Action, error) {
	k := readView(h.seat, t.View)
	info, _ := t.Notification.Data.(AskInfo)
	legal := t.Notification.Legal
	var text string
	switch info.Kind {
	case AskWolfChat:
		text = h.wolfChat(k, info)
	case AskKill:
		text = pick(legal, VerbKill, h.killTarget(k, info), VerbNone)
	case AskInspect:
		text = h.inspect(k, legal)
	case AskProtect:
		text = h.protect(k, legal)
	case AskWitch:
		text = h.witch(k, info, legal)
	case AskSpeech:
		text = h.speech(k, info)
	case AskVote:
		text = pick(legal, VerbVote, h.voteTarget(k, info), VerbAbstain)
	default:
		text = randomMove(h.rng, k, legal)
	}
	if info.Kind == AskWolfChat || info.Kind == AskSpeech {
		if len([]rune(text)) > k.speechMax {
			text = PassSpeech
		}
	}
	return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
}

// credibleSeer is the first seer claimant (-1 when nobody claimed).
func (k *knowledge) credibleSeer() int {
	if c := k.claims(); len(c) > 0 {
		return c[0].seat
	}
	return -1
}

// preferredVictim is the pack's choice from public information: the
// credible seer if it is a villager, else the latest living villager who
// accused a werewolf, else a random living villager.
func (h *heuristic) preferredVictim(k *knowledge) int {
	if s := k.credibleSeer(); s >= 0 && k.alive[s] && !k.isWolf(s) {
		return s
	}
	for i := len(k.speeches) - 1; i >= 0; i-- {
		sp := k.speeches[i]
		if !k.alive[sp.Seat] || k.isWolf(sp.Seat) {
			continue
		}
		for _, s := range append(namesIn(reAccusation, sp.Text, k.n), namesIn(reFinding, sp.Text, k.n)...) {
			if k.isWolf(s) {
				return sp.Seat
			}
		}
	}
	prey := k.living(func(i int) bool { return !k.isWolf(i) })
	if len(prey) == 0 {
		return -1
	}
	return prey[h.rng.IntN(len(prey))]
}

// plannedVictim is tonight's first kill plan on the werewolf channel.
func (k *knowledge) plannedVictim(cycle int) int {
	for _, c := range k.chat {
		if c.Cycle != cycle {
			continue
		}
		for _, s := range namesIn(reKillPlan, c.Text, k.n) {
			if k.alive[s] && !k.isWolf(s) {
				return s
			}
		}
	}
	return -1
}

func (h *heuristic) wolfChat(k *knowledge, info AskInfo) string {
	if v := k.plannedVictim(info.Cycle); v >= 0 {
		return fmt.Sprintf("Agreed: kill %s.", SeatName(v))
	}
	if v := h.preferredVictim(k); v >= 0 {
		return fmt.Sprintf("Let us kill %s.", SeatName(v))
	}
	return PassSpeech
}

func (h *heuristic) killTarget(k *knowledge, info AskInfo) int {
	if info.Round > 1 {
		// Follow the lowest-seated werewolf's last choice, so the pack
		// converges in the next round.
		for i := len(k.rounds) - 1; i >= 0; i-- {
			r := k.rounds[i]
			if r.Cycle == info.Cycle && len(r.Choices) > 0 && r.Choices[0].Choice.Verb == VerbKill {
				return r.Choices[0].Choice.Target
			}
		}
	}
	if v := k.plannedVictim(info.Cycle); v >= 0 {
		return v
	}
	return h.preferredVictim(k)
}

func (h *heuristic) inspect(k *knowledge, legal []string) string {
	var fresh []int
	for _, s := range legalTargets(legal, VerbInspect, k.n) {
		if _, done := k.findings[s]; !done {
			fresh = append(fresh, s)
		}
	}
	if len(fresh) == 0 {
		return VerbPass
	}
	return targetMove(VerbInspect, fresh[h.rng.IntN(len(fresh))])
}

func (h *heuristic) protect(k *knowledge, legal []string) string {
	if s := k.credibleSeer(); s >= 0 && k.alive[s] {
		if m := pick(legal, VerbProtect, s, ""); m != "" {
			return m
		}
	}
	targets := legalTargets(legal, VerbProtect, k.n)
	if len(targets) == 0 {
		return VerbPass
	}
	return targetMove(VerbProtect, targets[h.rng.IntN(len(targets))])
}

func (h *heuristic) witch(k *knowledge, info AskInfo, legal []string) string {
	if slices.Contains(legal, VerbSave) {
		return VerbSave
	}
	score := k.suspicion(info.Cycle)
	if t := argmax(score, legalTargets(legal, VerbPoison, k.n), 2.5); t >= 0 {
		return targetMove(VerbPoison, t)
	}
	return VerbPass
}

// knownWolves are the living werewolves the seer has found.
func (k *knowledge) knownWolves() []int {
	var out []int
	for s, w := range k.findings {
		if w && k.alive[s] {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func (h *heuristic) speech(k *knowledge, info AskInfo) string {
	score := k.suspicion(info.Cycle)
	// Whoever claims the seer and names me a werewolf.
	var accusers []int
	for _, c := range k.claims() {
		if slices.Contains(c.accused, k.me) && k.alive[c.seat] {
			accusers = append(accusers, c.seat)
		}
	}
	switch {
	case k.role == Werewolf:
		if len(accusers) > 0 && !k.isWolf(accusers[0]) {
			// Exposed: counter-claim the seer and accuse the accuser.
			return fmt.Sprintf("I am the seer. %s is a werewolf. Vote %s.", SeatName(accusers[0]), SeatName(accusers[0]))
		}
		if t := h.wolfDayTarget(k, info); t >= 0 {
			return fmt.Sprintf("I suspect %s.", SeatName(t))
		}
		return PassSpeech
	case k.role == Seer:
		if wolves := k.knownWolves(); len(wolves) > 0 {
			return fmt.Sprintf("I am the seer. %s is a werewolf. Vote %s.", SeatName(wolves[0]), SeatName(wolves[0]))
		}
		claimed := slices.ContainsFunc(k.claims(), func(c seerClaim) bool { return c.seat == k.me })
		if claimed {
			var clear []string
			for s, w := range k.findings {
				if !w && k.alive[s] {
					clear = append(clear, SeatName(s)+" is not a werewolf")
				}
			}
			slices.Sort(clear)
			if len(clear) > 0 {
				return "I am the seer. " + strings.Join(clear, ". ") + "."
			}
		}
		return "I have no information yet."
	default:
		if len(accusers) > 0 {
			return fmt.Sprintf("I am not a werewolf, so %s is lying. I suspect %s.", SeatName(accusers[0]), SeatName(accusers[0]))
		}
		if t := argmax(score, k.living(func(i int) bool { return i != k.me }), 2.5); t >= 0 {
			return fmt.Sprintf("I believe %s is a werewolf. Vote %s.", SeatName(t), SeatName(t))
		}
		return "I have no information yet."
	}
}

// wolfDayTarget is the villager the pack pushes today: the credible seer
// if it is a villager, else the villager the public suspects most, else
// one chosen by the cycle number, which every werewolf computes alike.
func (h *heuristic) wolfDayTarget(k *knowledge, info AskInfo) int {
	if s := k.credibleSeer(); s >= 0 && k.alive[s] && !k.isWolf(s) {
		return s
	}
	prey := k.living(func(i int) bool { return !k.isWolf(i) })
	if len(prey) == 0 {
		return -1
	}
	if t := argmax(k.suspicion(info.Cycle), prey, 0); t >= 0 {
		return t
	}
	return prey[info.Cycle%len(prey)]
}

func (h *heuristic) voteTarget(k *knowledge, info AskInfo) int {
	if k.role == Werewolf {
		for _, c := range k.claims() {
			if slices.Contains(c.accused, k.me) && k.alive[c.seat] && !k.isWolf(c.seat) {
				return c.seat
			}
		}
		return h.wolfDayTarget(k, info)
	}
	score := k.suspicion(info.Cycle)
	for _, c := range k.claims() {
		if slices.Contains(c.accused, k.me) {
			score[c.seat] += 10 // I know I am innocent: the claimant lies
		}
	}
	if k.role == Seer {
		for s, w := range k.findings {
			if w {
				score[s] += 10
			} else {
				score[s] = -1
			}
		}
	}
	others := k.living(func(i int) bool { return i != k.me })
	if t := argmax(score, others, 2.5); t >= 0 {
		return t
	}
	// Without strong evidence the village agrees on a lot drawn from the
	// public state, so its votes do not scatter against the pack's block.
	t := k.villageLot(info.Cycle, score)
	if t == k.me || (t >= 0 && score[t] < 0) {
		return -1
	}
	return t
}

// villageLot is a living, uncleared seat drawn from the cycle and the
// living set alone: every villager computes the same one.
func (k *knowledge) villageLot(cycle int, score []float64) int {
	cand := k.living(func(i int) bool { return score[i] >= 0 })
	if len(cand) == 0 {
		return -1
	}
	parts := []uint64{uint64(cycle)}
	for _, s := range cand {
		parts = append(parts, uint64(s))
	}
	return cand[seeds.Derive(0x766f7465, parts...)%uint64(len(cand))]
}

// random plays uniformly random legal moves.
type random struct {
	seat engine.Seat
	rng  *rand.Rand
}

func newRandom(s engine.Seat, seed uint64) *random {
	return &random{seat: s, rng: rand.New(rand.NewPCG(seed, 0x72616e646f6d))}
}

// Act implements engine.Agent.
func (r *random) Act(_ context.Context, t engine.Turn) (engine.Action, error) {
	k := &knowledge{n: 0}
	for _, ev := range t.View {
		if b, ok := ev.Data.(Briefing); ok {
			k.n, k.me = b.Players, b.Seat
			break
		}
	}
	return engine.Action{NotificationID: t.Notification.ID, Text: randomMove(r.rng, k, t.Notification.Legal)}, nil
}

// randomMove picks a legal move uniformly; for a speech (no finite legal
// list) it passes or accuses a random other player, with equal odds.
func randomMove(rng *rand.Rand, k *knowledge, legal []string) string {
	if len(legal) > 0 {
		return legal[rng.IntN(len(legal))]
	}
	if k.n < 2 || rng.IntN(2) == 0 {
		return PassSpeech
	}
	s := rng.IntN(k.n - 1)
	if s >= k.me {
		s++
	}
	return fmt.Sprintf("I suspect %s.", SeatName(s))
}
