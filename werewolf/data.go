package werewolf

// Typed payloads of the events this environment writes (engine.Event.Data).
// In-process agents type-assert them; remote agents read the JSON.

// Briefing is the Data of a seat's briefing. Werewolves lists the pack and
// is set only in werewolves' briefings.
type Briefing struct {
	Seat       int        `json:"seat"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Team       string     `json:"team"`
	Werewolves []int      `json:"werewolves,omitempty"`
	Players    int        `json:"players"`
	Roles      RoleCounts `json:"roles"`
	MaxCycles  int        `json:"max_cycles"`
	SpeechMax  int        `json:"speech_max_chars"`
}

// PhaseInfo is the Data of a phase event: the phase and who is alive.
type PhaseInfo struct {
	Cycle  int    `json:"cycle"`
	Phase  string `json:"phase"` // "night", "day", "vote"
	Living []int  `json:"living"`
}

// Ask kinds (AskInfo.Kind).
const (
	AskWolfChat = "wolf_chat"
	AskKill     = "kill"
	AskInspect  = "inspect"
	AskProtect  = "protect"
	AskWitch    = "witch"
	AskSpeech   = "speech"
	AskVote     = "vote"
)

// AskInfo is the Data of every notification.
type AskInfo struct {
	Kind   string `json:"kind"`
	Cycle  int    `json:"cycle"`
	Round  int    `json:"round,omitempty"`
	Living []int  `json:"living"`
}

// WolfChat is a line on the werewolves' channel.
type WolfChat struct {
	Cycle int    `json:"cycle"`
	Seat  int    `json:"seat"`
	Text  string `json:"text"`
}

// SeatChoice is one seat's choice in a simultaneous round.
type SeatChoice struct {
	Seat   int    `json:"seat"`
	Choice Choice `json:"choice"`
}

// WolfChoices is a round of the werewolves' victim choice, shown to the
// pack only. Victim is the agreed seat or -1.
type WolfChoices struct {
	Cycle   int          `json:"cycle"`
	Round   int          `json:"round"`
	Choices []SeatChoice `json:"choices"`
	Victim  int          `json:"victim"`
	Final   bool         `json:"final"`
}

// InspectResult is the seer's private result.
type InspectResult struct {
	Cycle    int  `json:"cycle"`
	Seer     int  `json:"seer"`
	Target   int  `json:"target"`
	Werewolf bool `json:"werewolf"`
}

// WitchInfo tells the witch, privately, whom the werewolves attacked (-1:
// nobody).
type WitchInfo struct {
	Cycle  int `json:"cycle"`
	Witch  int `json:"witch"`
	Victim int `json:"victim"`
}

// Deaths is the public dawn announcement (no roles, no causes).
type Deaths struct {
	Cycle int   `json:"cycle"`
	Seats []int `json:"seats"`
}

// SpeechEvent is a public day speech.
type SpeechEvent struct {
	Cycle int    `json:"cycle"`
	Seat  int    `json:"seat"`
	Text  string `json:"text"`
}

// VoteResult is the public result of a day vote. Eliminated is -1 when
// nobody is (a tie for the most votes, or no votes).
type VoteResult struct {
	Cycle      int          `json:"cycle"`
	Votes      []SeatChoice `json:"votes"`
	Eliminated int          `json:"eliminated"`
	Tie        bool         `json:"tie"`
}

// GameOver is the public end-of-game notice. It names the winning side
// only; roles stay in the outcome's terms.
type GameOver struct {
	Cycle  int    `json:"cycle"`
	Winner string `json:"winner"`
}

// Scenario is everything dealt at the start (Episode.Scenario).
type Scenario struct {
	Params Params   `json:"params"`
	Roles  []string `json:"roles"`
	Teams  []string `json:"teams"`
}

// SeatRole names a seat and its role (outcome terms only).
type SeatRole struct {
	Seat int    `json:"seat"`
	Name string `json:"name"`
	Role string `json:"role"`
}

// Elimination records one death, in order.
type Elimination struct {
	SeatRole
	Cycle int    `json:"cycle"`
	Phase string `json:"phase"` // "night" or "day"
	Cause string `json:"cause"` // "werewolves", "poison" or "vote"
}

// Terms are the outcome's terms.
type Terms struct {
	// Winner is "werewolves", "villagers" or "draw".
	Winner string `json:"winner"`
	// Cycles is the cycle the game ended in (max_cycles for a draw).
	Cycles       int           `json:"cycles"`
	Living       []SeatRole    `json:"living"`
	Eliminations []Elimination `json:"eliminations"`
}
