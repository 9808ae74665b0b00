package selfplay

import (
	"fmt"
	"regexp"
	"strings"
)

// TraceToM is the theory-of-mind reply trace (Options.Trace): a model
// seat writes
//
//	INFER: <what it believes the counterpart wants>
//	ACT: <its move>
//	ANTICIPATE: <the counterpart's next move, as it expects it>
//
// Only the ACT line reaches the environment; the whole trace is in the
// seat's stream and is trained (its tokens are the model's).
const TraceToM = "tom"

// Traces are the reply traces a runner knows.
var Traces = []string{TraceToM}

// traceLine bounds the free-text lines of a trace.
const traceLine = `[^\n]{1,160}`

var grammarRoot = regexp.MustCompile(`(?m)^root(\s*::=)`)

// traceGrammar wraps a notification's move grammar into the trace's: the
// move grammar's root becomes the ACT line's rule. Without a grammar the
// trace is free text and the ACT line is left to the parser.
func traceGrammar(g string) string {
	if g == "" {
		return ""
	}
	return "root ::= \"INFER: \" tom-line \"\\nACT: \" tom-act \"\\nANTICIPATE: \" tom-line\n" +
		"tom-line ::= " + traceLine + "\n" + grammarRoot.ReplaceAllString(g, "tom-act$1")
}

// traceAction returns the move of a traced reply: its ACT line's text.
func traceAction(reply string) (string, error) {
	for line := range strings.SplitSeq(reply, "\n") {
		if act, ok := strings.CutPrefix(line, "ACT: "); ok {
			return act, nil
		}
	}
	return "", fmt.Errorf("the reply has no ACT line")
}
