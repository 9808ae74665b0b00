package chattemplate

import "strings"

// ThinkOpen and ThinkClose delimit a reasoning block in the models that
// reason before they answer (Qwen3, DeepSeek-R1's distillations).
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// SplitThinking splits a reply into its reasoning and its answer the way
// Qwen3's template does: the answer is what follows the last </think>
// (leading newlines dropped), the reasoning what precedes it, without the
// <think> tag. closed reports whether the reply had a </think>; without
// one the whole reply is the answer.
func SplitThinking(reply string) (reasoning, answer string, closed bool) {
	i := strings.LastIndex(reply, ThinkClose)
	if i < 0 {
		return "", reply, false
	}
	answer = strings.TrimLeft(reply[i+len(ThinkClose):], "\n")
	reasoning = strings.TrimRight(reply[:i], "\n")
	if j := strings.LastIndex(reasoning, ThinkOpen); j >= 0 {
		reasoning = reasoning[j+len(ThinkOpen):]
	}
	return strings.TrimLeft(reasoning, "\n"), answer, true
}
