package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
)

// shorter are flags appended to a Quickstart command so that the test
// runs it in seconds: later flags override earlier ones, so the README's
// own values are what a user runs and these only shrink the work.
var shorter = map[string][]string{
	"play":     {"--episodes", "8"},
	"selfplay": {"--iterations", "1", "--episodes", "8", "--set", "eval.episodes=4"},
	"eval":     {"--episodes", "4", "--bootstrap", "100"},
}

// quickstart returns the commands of README.md's Quickstart block.
func quickstart(t *testing.T) [][]string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Quickstart")
	if !ok {
		t.Fatal("README.md has no Quickstart section")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md's Quickstart has no sh block")
	}
	var cmds [][]string
	for _, line := range strings.Split(block, "\n") {
		words, err := shellWords(line)
		if err != nil {
			t.Fatalf("Quickstart line %q: %v", line, err)
		}
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
	}
	return cmds
}

// shellWords splits a line as sh would for the Quickstart's simple
// commands: blanks separate words, quotes group them, # starts a comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '#' && !in:
			return words, nil
		case r == ' ' || r == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, io.ErrUnexpectedEOF
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// TestQuickstart runs README.md's Quickstart, every line on what the
// lines before it made, in a fresh directory (shortened by shorter; the
// server is asked for its page and stopped).
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the built-in model for an iteration")
	}
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed")
	}
	cmds := quickstart(t)
	if len(cmds) < 5 {
		t.Fatalf("Quickstart has %d commands", len(cmds))
	}
	t.Setenv("OMAR_LLAMA_LIB", lib)
	t.Chdir(t.TempDir())
	for _, words := range cmds {
		line := strings.Join(words, " ")
		switch {
		case words[0] == "make":
			continue // builds the binary this test is
		case words[0] != "bin/omar" || len(words) < 2:
			t.Fatalf("Quickstart line %q: want bin/omar COMMAND or make", line)
		}
		args := append(words[1:], shorter[words[1]]...)
		if words[1] == "serve" {
			checkServe(t, args)
			continue
		}
		var out, errb bytes.Buffer
		start := time.Now()
		if code := runMain(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, args); code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", line, code, out.String(), errb.String())
		}
		t.Logf("%s: %.1f s", line, time.Since(start).Seconds())
	}
}

// checkServe starts the Quickstart's server on a free port, fetches the
// page with the secret it printed, and stops it.
func checkServe(t *testing.T, args []string) {
	t.Helper()
	for i := range args {
		if args[i] == "--addr" && i+1 < len(args) {
			args[i+1] = "127.0.0.1:0"
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- runMain(ctx, &cliEnv{stdout: &out, stderr: &errb}, args) }()
	link := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/ui/#secret=(\S+)`)
	var m []string
	for deadline := time.Now().Add(2 * time.Minute); m == nil; {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before serving\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
		case <-time.After(50 * time.Millisecond):
		}
		if m = link.FindStringSubmatch(out.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("serve printed no link:\n%s", out.String())
		}
	}
	for _, path := range []string{"/ui/", "/v1/site"} {
		resp, err := http.Get("http://" + m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+m[1]+"/v1/episodes", nil)
	req.Header.Set("Authorization", "Bearer "+m[2])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/episodes with the printed secret: %s", resp.Status)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve: exit %d after the interrupt\n%s", code, errb.String())
	}
}

func TestShellWords(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"bin/omar envs   # list", []string{"bin/omar", "envs"}},
		{`a --params '{"x": 1}' "b c"`, []string{"a", "--params", `{"x": 1}`, "b c"}},
		{"  # only a comment", nil},
		{"x '#not'", []string{"x", "#not"}},
	} {
		got, err := shellWords(tt.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
