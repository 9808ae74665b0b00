package sotopia

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ActionKind is one of SOTOPIA's five action types.
type ActionKind string

// The action kinds and the keyword that starts each in the move format.
const (
	ActNone      ActionKind = "none"
	ActSpeak     ActionKind = "speak"
	ActNonVerbal ActionKind = "non-verbal"
	ActPhysical  ActionKind = "action"
	ActLeave     ActionKind = "leave"
)

// Move is a parsed action.
type Move struct {
	Kind    ActionKind `json:"kind"`
	Content string     `json:"content,omitempty"`
}

// String renders m in the move format; Parse(m.String()) == m.
func (m Move) String() string {
	if m.Kind == ActNone || m.Kind == ActLeave {
		return string(m.Kind)
	}
	return string(m.Kind) + ": " + m.Content
}

// FormatHelp is the move format as shown to agents.
const FormatHelp = `Reply with exactly one action on a single line, in one of these forms:
  speak: <what you say>
  non-verbal: <a gesture or facial expression, e.g. smiles and nods>
  action: <a physical action, e.g. pours two cups of tea>
  none
  leave
"none" means you do nothing this turn; "leave" ends the conversation for both of you.`

// MoveGrammar returns the GBNF of a move whose content has at most
// maxChars characters (root rule "root"). Characters are listed as
// positive ranges of valid code points (no controls, no surrogates, nothing
// above U+10FFFF) because a negated class would let llama.cpp's loose UTF-8
// decoder accept invalid lead bytes. '<' is left out: every chat control
// token is spelt with it (<think>, <|im_end|>), and none may appear in a
// move as text.
func MoveGrammar(maxChars int) string {
	return fmt.Sprintf(`root ::= "none" | "leave" | "speak: " content | "non-verbal: " content | "action: " content
content ::= [!-;=-~%[2]s] [ -;=-~%[2]s]{0,%[1]d}
`, maxChars-1, nonASCII)
}

// nonASCII is the GBNF class body of every valid non-ASCII code point
// except the C1 controls.
const nonASCII = `\u00a0-\ud7ff\ue000-\U0010ffff`

// ParseMove parses one reply in the move format. Surrounding whitespace is
// ignored and a content wrapped in double quotes is unwrapped; everything
// else must match the grammar. Errors say what to write instead.
func ParseMove(text string, maxChars int) (Move, error) {
	// llama.cpp's grammar sampler decodes UTF-8 loosely, so a constrained
	// reply can still hold overlong or truncated sequences. Such bytes must
	// never reach the other seat's prompt (llama.cpp's tokenizer aborts the
	// process on them), so they become U+FFFD.
	t := strings.TrimSpace(strings.ToValidUTF8(text, "\uFFFD"))
	if t == "" {
		return Move{}, fmt.Errorf("empty reply: %s", shortHelp)
	}
	if strings.ContainsAny(t, "\r\n") {
		return Move{}, fmt.Errorf("write exactly one action on a single line: %s", shortHelp)
	}
	switch t {
	case "none":
		return Move{Kind: ActNone}, nil
	case "leave":
		return Move{Kind: ActLeave}, nil
	}
	kw, content, ok := strings.Cut(t, ":")
	if !ok {
		return Move{}, fmt.Errorf("%q has no action keyword: %s", clip(t), shortHelp)
	}
	kind := ActionKind(kw)
	switch kind {
	case ActSpeak, ActNonVerbal, ActPhysical:
	default:
		return Move{}, fmt.Errorf("unknown action %q: %s", clip(kw), shortHelp)
	}
	content = strings.TrimSpace(content)
	if len(content) >= 2 && strings.HasPrefix(content, `"`) && strings.HasSuffix(content, `"`) {
		if inner := strings.TrimSpace(content[1 : len(content)-1]); inner != "" {
			content = inner
		}
	}
	if content == "" {
		return Move{}, fmt.Errorf("%s needs a content after the colon, e.g. %q", kind, string(kind)+": hello")
	}
	if n := utf8.RuneCountInString(content); n > maxChars {
		return Move{}, fmt.Errorf("%s is %d characters long; at most %d are allowed", kind, n, maxChars)
	}
	return Move{Kind: kind, Content: content}, nil
}

const shortHelp = `write "speak: <text>", "non-verbal: <gesture>", "action: <physical action>", "none" or "leave"`

func clip(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	return string([]rune(s)[:40]) + "…"
}
