package llamacpp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLogRouting: llama.cpp's log lines arrive in the slog logger, whole
// lines, at the mapped level.
func TestLogRouting(t *testing.T) {
	m := testModel(t)
	var buf bytes.Buffer
	SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer SetLogger(nil)
	// An invalid grammar makes llama.cpp log an error (handed over
	// unchecked: NewGrammarSampler's Go check would refuse it first).
	if _, err := initGrammar(m.Vocab(), `root ::= undefined`, "root"); err == nil {
		t.Fatal("invalid grammar accepted")
	}
	out := buf.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "source=llama.cpp") {
		t.Errorf("got log %q, want an ERROR line from llama.cpp", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("fragment instead of a whole line: %q", line)
		}
	}
}

func TestLogLineAssembly(t *testing.T) {
	var buf bytes.Buffer
	SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer SetLogger(nil)
	logLine(ggmlLogLevelWarn, "part one, ")
	logLine(ggmlLogLevelCont, "part two\n")
	logLine(ggmlLogLevelInfo, "a\nb\n")
	got := buf.String()
	for _, want := range []string{`level=WARN msg="part one, part two"`, "level=DEBUG msg=a", "level=DEBUG msg=b"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
}
