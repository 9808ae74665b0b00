package proxy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOpenAINodeClient runs the openai npm client against the proxy on
// loopback (testdata/node/openai-client.cjs): a chat completion, a call
// with tools whose reply is a tool call, the follow-up with the tool's
// result and the same call streamed all parse without error. The client
// is an npm fixture (scripts/install-npm-fixtures.sh): the test skips
// when OMAR_NPM_FIXTURES is unset and fails when it is set but the
// client or node is missing.
func TestOpenAINodeClient(t *testing.T) {
	dir := os.Getenv("OMAR_NPM_FIXTURES")
	if dir == "" {
		t.Skip("OMAR_NPM_FIXTURES is not set: the openai npm client is installed by `make fixtures` (scripts/install-npm-fixtures.sh), which sets it")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("OMAR_NPM_FIXTURES is set but node is missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "openai", "package.json")); err != nil {
		t.Fatalf("OMAR_NPM_FIXTURES=%s: the openai client is missing (run make fixtures): %v", dir, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "node", "openai-client.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	ts := newToolServer(t, weatherReply)
	cmd := exec.CommandContext(t.Context(), node, script, ts.URL+"/v1")
	cmd.Env = append(os.Environ(), "OMAR_NPM_FIXTURES="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	var got struct {
		Plain struct{ Content, Finish string }
		Call  struct {
			Finish  string
			Content *string
			Name    string
			Args    map[string]string
		}
		Answer struct{ Content, Finish string }
		Stream struct {
			Calls  []string
			Finish string
			Usage  int
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client printed %s: %v", out, err)
	}
	if got.Plain.Content != "Hello." || got.Plain.Finish != "stop" {
		t.Errorf("chat: got %+v", got.Plain)
	}
	if c := got.Call; c.Finish != "tool_calls" || c.Content != nil || c.Name != "get_weather" || c.Args["city"] != "Paris" {
		t.Errorf("tool call: got %+v", c)
	}
	if got.Answer.Content != "It is 18C in Paris." || got.Answer.Finish != "stop" {
		t.Errorf("follow-up: got %+v", got.Answer)
	}
	if s := got.Stream; len(s.Calls) != 1 || s.Calls[0] != "get_weather" || s.Finish != "tool_calls" || s.Usage == 0 {
		t.Errorf("stream: got %+v", s)
	}
	rec, err := ts.proxy.Session(t.Context(), "node")
	if err != nil || len(rec.Calls) != 4 {
		t.Fatalf("session: %d calls, %v: want 4", len(rec.Calls), err)
	}
	// The follow-up echoed the call as the client parsed it: it extends
	// the segment of the call that made it.
	if rec.Calls[2].Segment != rec.Calls[1].Segment {
		t.Errorf("the follow-up started segment %d, want %d", rec.Calls[2].Segment, rec.Calls[1].Segment)
	}
}
