package sotopia

import (
	"fmt"
	"strings"
)

// History is the omniscient account of an episode: everything dealt and
// everything both agents did. The judge reads it.
type History struct {
	Setup Setup `json:"setup"`
	Terms Terms `json:"terms"`
}

const judgeSystem = "You are an impartial evaluator of social interactions between two role-played characters. " +
	"You see everything: both characters' full profiles, their secrets and their private goals. " +
	"Judge only what happened in the transcript. Reply with the JSON object asked for and nothing else."

// Transcript renders turns 1..upto (all when upto ≤ 0) with real names.
func (h History) Transcript(upto int) string {
	var b strings.Builder
	for _, t := range h.Terms.Turns {
		if upto > 0 && t.Turn > upto {
			break
		}
		fmt.Fprintf(&b, "Turn %d: %s\n", t.Turn, narrate(h.Setup.Characters[t.Seat].Name, t.Move))
	}
	if b.Len() == 0 {
		b.WriteString("(nothing happened)\n")
	}
	return b.String()
}

// context renders the scenario, both full profiles and both goals.
func (h History) context() string {
	s := h.Setup.Scenario
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario (%s, relationship: %s): %s\n\n", s.Category, strings.ReplaceAll(string(s.Relationship), "_", " "), s.Text)
	for i, c := range h.Setup.Characters {
		fmt.Fprintf(&b, "agent_%d is %s, the %s.\n%s", i+1, c.Name, s.Agents[i].Role, describeFull(c))
		fmt.Fprintf(&b, "- Private goal: %s\n\n", s.Agents[i].Goal)
	}
	return b.String()
}

func (h History) ending() string {
	switch h.Terms.End {
	case "left":
		return fmt.Sprintf("The conversation ended when %s left.", h.Setup.Characters[h.Terms.LeftBy].Name)
	case "silence":
		return "The conversation ended because nobody did anything for several turns."
	default:
		return "The conversation ended at the turn limit."
	}
}

// scorePrompt is the prompt of a scoring pass over dims.
func scorePrompt(h History, dims []Dimension, ask string) string {
	var b strings.Builder
	b.WriteString(h.context())
	b.WriteString("Transcript:\n")
	b.WriteString(h.Transcript(0))
	b.WriteString(h.ending() + "\n\n")
	b.WriteString(ask + " For each agent and each dimension write a short reasoning first, then an integer score in the range given.\n")
	for _, d := range dims {
		fmt.Fprintf(&b, "- %s (%d..%d): %s\n", d.Key, d.Lo, d.Hi, d.Text)
	}
	b.WriteString("\nReply with one JSON object and no spaces outside strings:\n")
	b.WriteString(`{"agent_1":{`)
	for i, d := range dims {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%s":{"reasoning":"...","score":N}`, d.Key)
	}
	b.WriteString(`},"agent_2":{...same keys...}}`)
	fmt.Fprintf(&b, "\nRubric version: %s\n", RubricVersion)
	return b.String()
}

// narrate renders a move in the third person (or with who = "You").
func narrate(who string, m Move) string {
	switch m.Kind {
	case ActSpeak:
		return fmt.Sprintf("%s said: %q", who, m.Content)
	case ActNonVerbal:
		return fmt.Sprintf("%s [non-verbal]: %s", who, m.Content)
	case ActPhysical:
		return fmt.Sprintf("%s [action]: %s", who, m.Content)
	case ActLeave:
		return fmt.Sprintf("%s left the conversation.", who)
	default:
		return fmt.Sprintf("%s did nothing.", who)
	}
}
