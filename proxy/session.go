package proxy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// Call is the record of one completion call of a session.
type Call struct {
	Index    int    `json:"index"`
	Segment  int    `json:"segment"`
	Endpoint string `json:"endpoint"` // "chat" or "completions"
	// Prompt is the call's whole prompt: the segment's stream before it
	// (PromptReused tokens of it were the stream, the rest new).
	Prompt    []int32 `json:"prompt"`
	NewPrompt int     `json:"new_prompt"` // tokens appended to the stream by this call
	// Tokens are the sampled reply ids, exactly as sampled.
	Tokens []int32 `json:"tokens"`
	// Logprobs are the behaviour log-probabilities (the distribution the
	// token was drawn from), RawLogprobs the model's raw softmax.
	Logprobs      []float32            `json:"logprobs"`
	RawLogprobs   []float32            `json:"raw_logprobs"`
	PolicyVersion int                  `json:"policy_version"`
	Sampling      inference.Sampling   `json:"sampling"`
	MaxTokens     int                  `json:"max_tokens"`
	Stop          inference.StopReason `json:"stop"`
	CachedTokens  int                  `json:"cached_tokens"` // prompt tokens served from the KV cache
	Started       time.Time            `json:"started"`
	Finished      time.Time            `json:"finished"`
	// ToolCalls are the calls read from the reply and answered to the
	// client; Tokens stay the sampled ids of their text.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Forwarded reports a reply of the forward endpoint, re-tokenised:
	// the policy did not sample it, and its logprobs are zeros.
	Forwarded bool `json:"forwarded,omitempty"`
}

// Segment is one token stream of a session: every call whose prompt
// extended the stream appended its new prompt tokens and its reply.
type Segment struct {
	Tokens []int32 `json:"tokens"`
	// Mask is true on reply tokens: the loss applies to them only.
	Mask        []bool    `json:"mask"`
	Logprobs    []float32 `json:"logprobs"`
	RawLogprobs []float32 `json:"raw_logprobs"`
	// TurnEnds[k] is the index of the last token of reply k.
	TurnEnds       []int `json:"turn_ends"`
	PolicyVersions []int `json:"policy_versions"`
	// Forwarded[k] reports that reply k came from the forward endpoint;
	// nil when none did.
	Forwarded []bool `json:"forwarded,omitempty"`

	// text is the stream as the client renders it: the last prompt's
	// text, then the reply as the client received it (content). A rendered
	// prompt that starts with it extends the stream whatever its
	// tokenisation would be.
	text []byte
	// tail is the text of the last reply's tokens beyond its content: the
	// end-of-turn token it stopped on, or the stop string OpenAI cuts
	// from content. A prompt that continues with it does not repeat those
	// tokens: the stream has them already.
	tail string
	// textOK is false once a call's prompt came as token ids: the text no
	// longer describes the stream.
	textOK bool
}

// Tie binds a session to a seat of an engine episode.
type Tie struct {
	Episode  string `json:"episode"`
	Seat     int    `json:"seat"`
	SeatName string `json:"seat_name"`
	Role     string `json:"role,omitempty"`
	Env      string `json:"env"`
	Seed     uint64 `json:"seed"`
	// token is the seat's bearer token that proved the tie.
	token string
}

// SessionRecord is a session as the management API shows it.
type SessionRecord struct {
	Key      string    `json:"key"`
	Tie      *Tie      `json:"tie,omitempty"`
	Calls    []Call    `json:"calls"`
	Segments []Segment `json:"segments"`
	Done     bool      `json:"done"`
	Reward   *float64  `json:"reward,omitempty"`
}

// session is one agent's conversation. lock serialises its calls (a
// stream has one order); the proxy's mutex guards the map, not this.
type session struct {
	key  string
	lock chan struct{}

	// Guarded by lock.
	tie      *Tie
	calls    []Call
	segments []*Segment
	done     bool
	reward   *float64

	// client is the address that created an untied session ("" tied).
	client string

	// Guarded by the proxy's mutex: eviction reads them.
	lastUsed time.Time
	busy     bool
	gone     bool  // evicted or forgotten: calls must look the key up again
	bytes    int64 // recorded, as callBytes counts
}

func newSession(key string) *session {
	return &session{key: key, lock: make(chan struct{}, 1)}
}

// acquire takes the session's lock or gives up with ctx.
func (s *session) acquire(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) release() { <-s.lock }

// extend decides how a call's prompt joins the session: it returns the
// full prompt ids, the index of the segment it belongs to (len(segments)
// for a new one) and how many of the ids are new. text is the rendered
// prompt ("" for token prompts), tokens the prompt ids when given as ids.
// tokenize is called only for the text that is not already the stream's.
func (s *session) extend(text string, ids []int32, isTokens bool, tokenize func(text string, addSpecial bool) ([]int32, error)) (prompt []int32, seg, fresh int, err error) {
	if n := len(s.segments); n > 0 {
		last := s.segments[n-1]
		if !isTokens && last.textOK && len(text) >= len(last.text) && text[:len(last.text)] == string(last.text) {
			// The stream's own ids stay; only the rest is tokenised.
			var more []int32
			rest := strings.TrimPrefix(text[len(last.text):], last.tail)
			if rest != "" {
				if more, err = tokenize(rest, false); err != nil {
					return nil, 0, 0, err
				}
			}
			return concat(last.Tokens, more), n - 1, len(more), nil
		}
		if !isTokens {
			if ids, err = tokenize(text, true); err != nil {
				return nil, 0, 0, err
			}
		}
		if len(ids) > len(last.Tokens) && slices.Equal(ids[:len(last.Tokens)], last.Tokens) {
			return ids, n - 1, len(ids) - len(last.Tokens), nil
		}
		return ids, n, len(ids), nil
	}
	if !isTokens {
		if ids, err = tokenize(text, true); err != nil {
			return nil, 0, 0, err
		}
	}
	return ids, 0, len(ids), nil
}

// concat returns a new slice a ++ b (a may be a segment's array, which
// must not be written through).
func concat(a, b []int32) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// record appends a finished call to the session: its prompt either
// extends segment seg or starts it. content is the reply as the client
// received it, tail the text of its tokens beyond that.
func (s *session) record(c Call, seg int, promptText string, isTokens bool, content, tail string) {
	if seg == len(s.segments) {
		s.segments = append(s.segments, &Segment{textOK: !isTokens})
	}
	g := s.segments[seg]
	start := len(g.Tokens)
	g.Tokens = append(g.Tokens, c.Prompt[start:]...)
	for range len(c.Prompt) - start {
		g.Mask = append(g.Mask, false)
		g.Logprobs = append(g.Logprobs, 0)
		g.RawLogprobs = append(g.RawLogprobs, 0)
	}
	if isTokens {
		g.textOK = false
	} else if g.textOK {
		// The prompt's text starts with the stream's (it extended it as
		// text) or its tokens do (then its text is the stream's text).
		g.text = append(g.text[:0], promptText...)
	}
	if len(c.Tokens) > 0 {
		g.Tokens = append(g.Tokens, c.Tokens...)
		for i := range c.Tokens {
			g.Mask = append(g.Mask, true)
			g.Logprobs = append(g.Logprobs, c.Logprobs[i])
			g.RawLogprobs = append(g.RawLogprobs, c.RawLogprobs[i])
		}
		g.TurnEnds = append(g.TurnEnds, len(g.Tokens)-1)
		g.PolicyVersions = append(g.PolicyVersions, c.PolicyVersion)
		if c.Forwarded && g.Forwarded == nil {
			g.Forwarded = make([]bool, len(g.TurnEnds)-1)
		}
		if g.Forwarded != nil {
			g.Forwarded = append(g.Forwarded, c.Forwarded)
		}
		// As the client will echo it: JSON carries no invalid UTF-8.
		g.text = append(g.text, asJSONText(content)...)
	}
	g.tail = tail
	c.Index, c.Segment = len(s.calls), seg
	s.calls = append(s.calls, c)
}

// trajectories turns the session's segments into trajectories with the
// reward: one per segment that holds a reply.
func (s *session) trajectories(reward float64, episodeIndex int) []selfplay.Trajectory {
	var out []selfplay.Trajectory
	for k, g := range s.segments {
		if len(g.TurnEnds) == 0 {
			continue
		}
		t := selfplay.Trajectory{
			Episode: episodeIndex, Seat: 0, Agent: "proxy:" + s.key, Segment: k,
			Tokens: slices.Clone(g.Tokens), Mask: slices.Clone(g.Mask),
			Logprobs: slices.Clone(g.Logprobs), RawLogprobs: slices.Clone(g.RawLogprobs),
			TurnEnds: slices.Clone(g.TurnEnds), TurnRewards: make([]float64, len(g.TurnEnds)),
			PolicyVersions: slices.Clone(g.PolicyVersions), Reward: reward,
			Scenario: "proxy/" + s.key, SeatName: s.key, Role: "agent", Env: "proxy",
		}
		if g.Forwarded != nil {
			// Forwarded turns train by imitation only: the estimators give
			// flagged turns no credit.
			t.Agent = "forward:" + s.key
			t.TurnFlags = make([][]string, len(g.TurnEnds))
			for k, f := range g.Forwarded {
				if f {
					t.TurnFlags[k] = []string{forwardedFlag}
				}
			}
		}
		if tie := s.tie; tie != nil {
			t.Env, t.Seed, t.Seat, t.SeatName = tie.Env, seeds.JSON(tie.Seed), tie.Seat, tie.SeatName
			t.Scenario = fmt.Sprintf("%s@%d", tie.Env, tie.Seed)
			t.Role = tie.Role
			if t.Role == "" {
				t.Role = tie.SeatName
			}
		}
		out = append(out, t)
	}
	return out
}

// snapshot copies the session for the management API.
func (s *session) snapshot() SessionRecord {
	r := SessionRecord{Key: s.key, Calls: slices.Clone(s.calls), Done: s.done, Reward: s.reward}
	if s.tie != nil {
		t := *s.tie
		r.Tie = &t
	}
	for _, g := range s.segments {
		r.Segments = append(r.Segments, *g)
	}
	return r
}

// asJSONText is s as a JSON string carries it: every byte that is not
// part of a valid UTF-8 character becomes U+FFFD, as encoding/json writes
// it. A model can sample such bytes (a character cut by max_tokens, or a
// small model's noise); the client then sends U+FFFD back.
func asJSONText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
