package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

var (
	modelOnce sync.Once
	modelPath string
	modelErr  error
)

// tinyModel writes the tiny test model once per test binary.
func tinyModel(t testing.TB) string {
	t.Helper()
	modelOnce.Do(func() {
		dir, err := os.MkdirTemp("", "proxy-test")
		if err != nil {
			modelErr = err
			return
		}
		modelPath = filepath.Join(dir, "tiny.gguf")
		modelErr = model.WriteFile(modelPath, model.Options{Seed: 1})
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelPath != "" {
		os.RemoveAll(filepath.Dir(modelPath))
	}
	os.Exit(code)
}

// testBackend opens the llama backend on the tiny model, or skips when the
// libraries are not installed (make test installs them, so there it runs).
func testBackend(t testing.TB) *llama.Backend {
	t.Helper()
	dir := llamatest.LibDir()
	if dir == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	o := llama.Options{}.Defaults()
	o.LibDir, o.Model = dir, tinyModel(t)
	o.Parallel, o.Context, o.Batch = 4, 2048, 256
	// One thread: the machine is shared, and llama.cpp's workers spin.
	o.Threads, o.ThreadsBatch = 1, 1
	// F32 keys and values: a reused prefix gives the logits a fresh
	// decode gives, to float rounding.
	o.KVType = llamacpp.KVTypeF32
	b, err := llama.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testProxy serves a proxy on b.
func testProxy(t testing.TB, b *llama.Backend, episodes Episodes, edit func(*Options)) (*Proxy, *httptest.Server) {
	t.Helper()
	o := Options{}.Defaults()
	o.Vocab = b.Model().Vocab().NTokens()
	o.MaxTokens = 64
	o.Secret = "proxy-test-secret-0123"
	o.Poll = 0
	if edit != nil {
		edit(&o)
	}
	p, err := New(b, b, episodes, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	return p, srv
}

// post sends body (raw bytes, or any value to encode) and returns the
// status and body.
func post(t testing.TB, url string, headers map[string]string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// decodeStrictly decodes data into v, refusing fields v does not have: a
// response must be exactly the documented shape.
func decodeStrictly(t testing.TB, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

// sseEvents splits a server-sent event stream into its data payloads and
// checks that it ends with [DONE].
func sseEvents(t testing.TB, body []byte) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			t.Fatalf("stream line %q is not a data line", line)
		}
		if done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		out = append(out, slices.Clone(data))
	}
	if !done {
		t.Fatalf("stream does not end with data: [DONE]:\n%s", body)
	}
	return out
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-4 }

// TestRecordsEqualBackend checks that the proxy's records (ids, behaviour
// and raw logprobs, policy version) and its response equal what the
// backend returns for the same prompt and seed, on a first call, on a call
// that extends the stream (served from the KV cache) and on a token-id
// completion.
func TestRecordsEqualBackend(t *testing.T) {
	b := testBackend(t)
	p, srv := testProxy(t, b, nil, nil)
	hdr := map[string]string{HeaderSession: "parity"}
	msgs := []map[string]any{{"role": "system", "content": "You negotiate."}, {"role": "user", "content": "Your offer?"}}
	calls := []struct {
		name     string
		endpoint string
		body     func(prev string) map[string]any
	}{
		{"first chat call", "/v1/chat/completions", func(string) map[string]any {
			return map[string]any{"messages": msgs, "max_tokens": 10, "seed": 21, "temperature": 0.8, "logprobs": true, "top_logprobs": 3}
		}},
		{"a call that extends the stream", "/v1/chat/completions", func(prev string) map[string]any {
			more := append(slices.Clone(msgs), map[string]any{"role": "assistant", "content": prev}, map[string]any{"role": "user", "content": "And now?"})
			return map[string]any{"messages": more, "max_tokens": 10, "seed": 22, "temperature": 0.8, "top_p": 0.9, "logprobs": true}
		}},
	}
	prev := ""
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			code, data := post(t, srv.URL+c.endpoint, hdr, c.body(prev))
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, data)
			}
			var cc ChatCompletion
			decodeStrictly(t, data, &cc)
			prev = *cc.Choices[0].Message.Content
			rec, err := p.Session(t.Context(), "parity")
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Calls) != i+1 {
				t.Fatalf("got %d calls recorded, want %d", len(rec.Calls), i+1)
			}
			call := rec.Calls[i]
			if call.Segment != 0 {
				t.Errorf("call %d in segment %d, want 0 (its prompt extends the stream)", i, call.Segment)
			}
			if i > 0 && (call.CachedTokens == 0 || call.NewPrompt >= len(call.Prompt)) {
				t.Errorf("an extending call reused %d cached tokens and added %d of %d prompt tokens: want reuse", call.CachedTokens, call.NewPrompt, len(call.Prompt))
			}
			// The same request, straight to the backend, fresh (no key).
			direct, err := b.Generate(t.Context(), []inference.Request{{Prompt: call.Prompt, MaxTokens: call.MaxTokens, Sampling: call.Sampling}})
			if err != nil {
				t.Fatal(err)
			}
			d := direct[0]
			if !slices.Equal(call.Tokens, d.Tokens) {
				t.Fatalf("recorded ids %v, backend %v", call.Tokens, d.Tokens)
			}
			for k := range d.Tokens {
				if !near(call.Logprobs[k], d.Logprobs[k]) || !near(call.RawLogprobs[k], d.RawLogprobs[k]) {
					t.Errorf("token %d: recorded logprobs %v/%v, backend %v/%v", k, call.Logprobs[k], call.RawLogprobs[k], d.Logprobs[k], d.RawLogprobs[k])
				}
				if got := cc.Choices[0].Logprobs.Content[k].Logprob; got != float64(call.RawLogprobs[k]) {
					t.Errorf("token %d: response logprob %v, recorded raw %v", k, got, call.RawLogprobs[k])
				}
			}
			if call.PolicyVersion != d.PolicyVersion || cc.Omar.PolicyVersion != d.PolicyVersion {
				t.Errorf("policy version recorded %d, answered %d, backend %d", call.PolicyVersion, cc.Omar.PolicyVersion, d.PolicyVersion)
			}
			if got, want := *cc.Choices[0].Message.Content, asJSONText(visible(d, nil)); got != want {
				t.Errorf("content %q, backend text %q", got, want)
			}
			// The segment is the stream: prompt, then the reply, masked.
			seg := rec.Segments[call.Segment]
			end := len(call.Prompt) + len(call.Tokens)
			if !slices.Equal(seg.Tokens[:end], append(slices.Clone(call.Prompt), call.Tokens...)) {
				t.Errorf("segment tokens are not prompt + reply")
			}
			// The call's new prompt tokens are context, its reply is
			// trained on.
			for k := len(call.Prompt) - call.NewPrompt; k < end; k++ {
				if want := k >= len(call.Prompt); seg.Mask[k] != want {
					t.Fatalf("mask[%d] = %v, want %v", k, seg.Mask[k], want)
				}
			}
		})
	}
	t.Run("token-id completion", func(t *testing.T) {
		ids := []int32{5, 17, 42, 8, 99}
		code, data := post(t, srv.URL+"/v1/completions", map[string]string{HeaderSession: "ids"},
			map[string]any{"prompt": ids, "max_tokens": 6, "seed": 5, "temperature": 1.1, "logprobs": 2})
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, data)
		}
		rec, err := p.Session(t.Context(), "ids")
		if err != nil {
			t.Fatal(err)
		}
		call := rec.Calls[0]
		if !slices.Equal(call.Prompt, ids) {
			t.Errorf("recorded prompt %v, sent %v", call.Prompt, ids)
		}
		direct, err := b.Generate(t.Context(), []inference.Request{{Prompt: ids, MaxTokens: 6, Sampling: inference.Sampling{Temperature: 1.1, Seed: 5}}})
		if err != nil {
			t.Fatal(err)
		}
		if d := direct[0]; !slices.Equal(call.Tokens, d.Tokens) || !slices.Equal(call.Logprobs, d.Logprobs) || !slices.Equal(call.RawLogprobs, d.RawLogprobs) {
			t.Errorf("recorded %v %v %v, backend %v %v %v", call.Tokens, call.Logprobs, call.RawLogprobs, d.Tokens, d.Logprobs, d.RawLogprobs)
		}
	})
}

// TestSegments checks when a call extends its session's stream and when
// it starts a new segment.
func TestSegments(t *testing.T) {
	b := testBackend(t)
	p, srv := testProxy(t, b, nil, nil)
	chat := func(key string, msgs ...string) string {
		t.Helper()
		var m []map[string]any
		for i, s := range msgs {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			m = append(m, map[string]any{"role": role, "content": s})
		}
		code, data := post(t, srv.URL+"/v1/chat/completions", map[string]string{HeaderSession: key}, map[string]any{"messages": m, "max_tokens": 5, "seed": 1})
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, data)
		}
		var cc ChatCompletion
		decodeStrictly(t, data, &cc)
		return *cc.Choices[0].Message.Content
	}
	r1 := chat("s", "Hello")
	r2 := chat("s", "Hello", r1, "More")       // extends
	chat("s", "Hello", r1, "Other")            // rewrites the last user turn: a new segment
	chat("s", "Hello", r1, "More", r2, "Next") // extends segment 0, which is no longer the last
	rec, err := p.Session(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	got := []int{}
	for _, c := range rec.Calls {
		got = append(got, c.Segment)
	}
	// Only the last segment can be extended: the fourth call does not
	// extend segment 1 (it diverged) and starts segment 2.
	if want := []int{0, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("got segments %v, want %v", got, want)
	}
	trajs, err := p.Reward(t.Context(), "s", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 3 {
		t.Fatalf("got %d trajectories, want 3 (one per segment)", len(trajs))
	}
	for i := range trajs {
		if err := trajs[i].Validate(); err != nil {
			t.Error(err)
		}
		if trajs[i].Reward != 0.5 || trajs[i].Segment != i {
			t.Errorf("trajectory %d: reward %v segment %d", i, trajs[i].Reward, trajs[i].Segment)
		}
	}
	if got := len(trajs[0].TurnEnds); got != 2 {
		t.Errorf("segment 0 has %d turns, want 2", got)
	}
	if _, err := p.Reward(t.Context(), "s", 1); err == nil {
		t.Error("a second reward for an ended session: got no error")
	}
	if code, data := post(t, srv.URL+"/v1/chat/completions", map[string]string{HeaderSession: "s"},
		map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}}); code != http.StatusConflict {
		t.Errorf("a call on an ended session: status %d (%s), want 409", code, data)
	}
}

// compatCase is a recorded client request under testdata/clients.
type compatCase struct {
	Client   string            `json:"client"`
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers"`
	Body     json.RawMessage   `json:"body"`
}

// TestClientCompatibility sends the requests recorded in the shape that
// openai-python, openai-node and LangChain send, and checks that every
// answer has exactly the documented shape: one choice, a finish reason,
// usage that adds up, logprobs exactly when asked (with as many
// alternatives as asked), and streams whose deltas add up to the reply
// the same call gives without streaming.
func TestClientCompatibility(t *testing.T) {
	b := testBackend(t)
	_, srv := testProxy(t, b, nil, func(o *Options) { o.APIKey = "sk-test" })
	files, err := filepath.Glob("testdata/clients/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded client requests: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c compatCase
			decodeStrictly(t, data, &c)
			var body map[string]any
			if err := json.Unmarshal(c.Body, &body); err != nil {
				t.Fatal(err)
			}
			stream, _ := body["stream"].(bool)
			chat := c.Endpoint == "/v1/chat/completions"
			top := 0
			logprobs := false
			if chat {
				logprobs, _ = body["logprobs"].(bool)
				if n, ok := body["top_logprobs"].(float64); ok {
					top = int(n)
				}
			} else if n, ok := body["logprobs"].(float64); ok {
				logprobs, top = true, int(n)
			}
			code, resp := post(t, srv.URL+c.Endpoint, c.Headers, c.Body)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, resp)
			}
			if !stream {
				content := checkAnswer(t, chat, resp, logprobs, top)
				_ = content
				return
			}
			streamed := checkStream(t, chat, sseEvents(t, resp), logprobs, top, body["stream_options"] != nil)
			// The same call without streaming gives the same reply.
			delete(body, "stream")
			delete(body, "stream_options")
			code, resp = post(t, srv.URL+c.Endpoint, c.Headers, body)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, resp)
			}
			if whole := checkAnswer(t, chat, resp, logprobs, top); whole != streamed {
				t.Errorf("streamed deltas add up to %q, the whole reply is %q", streamed, whole)
			}
		})
	}
}

// checkAnswer checks a non-streamed answer and returns its text.
func checkAnswer(t *testing.T, chat bool, data []byte, logprobs bool, top int) string {
	t.Helper()
	if chat {
		var cc ChatCompletion
		decodeStrictly(t, data, &cc)
		if cc.Object != "chat.completion" || !strings.HasPrefix(cc.ID, "chatcmpl-") || cc.Created == 0 || cc.Model == "" {
			t.Errorf("header fields: object %q id %q created %d model %q", cc.Object, cc.ID, cc.Created, cc.Model)
		}
		if len(cc.Choices) != 1 {
			t.Fatalf("got %d choices, want 1", len(cc.Choices))
		}
		ch := cc.Choices[0]
		if ch.Message == nil || ch.Message.Role != "assistant" || ch.Message.Content == nil || ch.Delta != nil {
			t.Fatalf("message %+v delta %+v", ch.Message, ch.Delta)
		}
		checkFinish(t, ch.FinishReason)
		n := checkUsage(t, cc.Usage)
		if (ch.Logprobs != nil) != logprobs {
			t.Fatalf("logprobs present %v, asked %v", ch.Logprobs != nil, logprobs)
		}
		if logprobs {
			if len(ch.Logprobs.Content) != n {
				t.Errorf("%d logprob entries for %d tokens", len(ch.Logprobs.Content), n)
			}
			for i, e := range ch.Logprobs.Content {
				checkEntry(t, i, e.Logprob, e.Token, e.Bytes)
				if len(e.TopLogprobs) != top {
					t.Errorf("token %d: %d top logprobs, asked %d", i, len(e.TopLogprobs), top)
				}
			}
		}
		return *ch.Message.Content
	}
	var c Completion
	decodeStrictly(t, data, &c)
	if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") {
		t.Errorf("object %q id %q", c.Object, c.ID)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("got %d choices, want 1", len(c.Choices))
	}
	ch := c.Choices[0]
	checkFinish(t, ch.FinishReason)
	n := checkUsage(t, c.Usage)
	if (ch.Logprobs != nil) != logprobs {
		t.Fatalf("logprobs present %v, asked %v", ch.Logprobs != nil, logprobs)
	}
	if logprobs {
		lp := ch.Logprobs
		if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TextOffset) != n {
			t.Errorf("%d tokens, %d logprobs, %d offsets for %d tokens", len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TextOffset), n)
		}
		if top > 0 && len(lp.TopLogprobs) != n {
			t.Errorf("%d top logprob maps for %d tokens", len(lp.TopLogprobs), n)
		}
		for i, l := range lp.TokenLogprobs {
			checkEntry(t, i, l, lp.Tokens[i], nil)
		}
	}
	return ch.Text
}

func checkFinish(t *testing.T, fr *string) {
	t.Helper()
	if fr == nil || (*fr != "stop" && *fr != "length") {
		t.Errorf("finish_reason %v, want stop or length", fr)
	}
}

func checkUsage(t *testing.T, u *Usage) int {
	t.Helper()
	if u == nil {
		t.Fatal("no usage")
	}
	if u.PromptTokens < 1 || u.CompletionTokens < 1 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %+v does not add up", u)
	}
	return u.CompletionTokens
}

func checkEntry(t *testing.T, i int, lp float64, tok string, bs []int) {
	t.Helper()
	if lp > 0 || math.IsNaN(lp) || math.IsInf(lp, 0) {
		t.Errorf("token %d: logprob %v", i, lp)
	}
	if bs != nil {
		raw := make([]byte, len(bs))
		for k, v := range bs {
			raw[k] = byte(v)
		}
		if got := asJSONText(string(raw)); got != tok {
			t.Errorf("token %d: bytes %v are %q, the token %q", i, bs, got, tok)
		}
	}
}

// checkStream checks a stream's chunks and returns the text they add up
// to.
func checkStream(t *testing.T, chat bool, events [][]byte, logprobs bool, top int, usage bool) string {
	t.Helper()
	var text strings.Builder
	finished, gotUsage, entries := 0, false, 0
	for k, ev := range events {
		if chat {
			var c ChatChunk
			decodeStrictly(t, ev, &c)
			if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") {
				t.Fatalf("chunk %d: object %q id %q", k, c.Object, c.ID)
			}
			if c.Usage != nil {
				if len(c.Choices) != 0 || k != len(events)-1 {
					t.Errorf("usage chunk %d of %d has %d choices", k, len(events), len(c.Choices))
				}
				gotUsage = true
				continue
			}
			if len(c.Choices) != 1 || c.Choices[0].Delta == nil || c.Choices[0].Message != nil {
				t.Fatalf("chunk %d: choices %+v", k, c.Choices)
			}
			ch := c.Choices[0]
			if k == 0 && ch.Delta.Role != "assistant" {
				t.Errorf("first chunk's role %q, want assistant", ch.Delta.Role)
			}
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				checkFinish(t, ch.FinishReason)
				finished++
			}
			if ch.Logprobs != nil {
				if !logprobs {
					t.Errorf("chunk %d has logprobs, none asked", k)
				}
				for _, e := range ch.Logprobs.Content {
					entries++
					if len(e.TopLogprobs) != top {
						t.Errorf("chunk %d: %d top logprobs, asked %d", k, len(e.TopLogprobs), top)
					}
				}
			}
			continue
		}
		var c Completion
		decodeStrictly(t, ev, &c)
		if c.Object != "text_completion" {
			t.Fatalf("chunk %d: object %q", k, c.Object)
		}
		if c.Usage != nil {
			gotUsage = true
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %d: %d choices", k, len(c.Choices))
		}
		text.WriteString(c.Choices[0].Text)
		if c.Choices[0].FinishReason != nil {
			checkFinish(t, c.Choices[0].FinishReason)
			finished++
		}
		if lp := c.Choices[0].Logprobs; lp != nil {
			entries += len(lp.Tokens)
		}
	}
	if finished != 1 {
		t.Errorf("%d chunks with a finish_reason, want 1", finished)
	}
	if gotUsage != usage {
		t.Errorf("usage chunk %v, asked %v", gotUsage, usage)
	}
	if logprobs && entries == 0 {
		t.Error("logprobs asked, none streamed")
	}
	return text.String()
}

// malformedCase is a bad request and the answer it must get.
type malformedCase struct {
	Name       string            `json:"name"`
	Endpoint   string            `json:"endpoint"`
	Headers    map[string]string `json:"headers"`
	Body       json.RawMessage   `json:"body"`
	Raw        *string           `json:"raw"`
	LongPrompt bool              `json:"long_prompt"`
	Status     int               `json:"status"`
	Param      string            `json:"param"`
}

// TestMalformedRequests checks that every bad request of
// testdata/malformed.json gets its 4xx, in OpenAI's error shape, naming
// the parameter at fault.
func TestMalformedRequests(t *testing.T) {
	b := testBackend(t)
	_, srv := testProxy(t, b, nil, nil)
	data, err := os.ReadFile("testdata/malformed.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []malformedCase
	decodeStrictly(t, data, &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var body []byte = c.Body
			if c.Raw != nil {
				body = []byte(*c.Raw)
			}
			if c.LongPrompt {
				ids := make([]int, 3000) // the test context holds 2048
				body, _ = json.Marshal(map[string]any{"prompt": ids, "max_tokens": 1})
			}
			code, resp := post(t, srv.URL+c.Endpoint, c.Headers, body)
			checkError(t, code, resp, c.Status, c.Param)
		})
	}
}

func checkError(t *testing.T, code int, resp []byte, status int, param string) {
	t.Helper()
	if code != status {
		t.Fatalf("status %d (%s), want %d", code, resp, status)
	}
	var eb ErrorBody
	decodeStrictly(t, resp, &eb)
	if eb.Error == nil || eb.Error.Message == "" || eb.Error.Type == "" {
		t.Fatalf("error body %s: want {\"error\": {\"message\", \"type\", …}}", resp)
	}
	if eb.Error.Param != param {
		t.Errorf("param %q (%s), want %q", eb.Error.Param, eb.Error.Message, param)
	}
}

// TestLimitsAndAuth checks the body size limit, the API key and the
// management API's secret.
func TestLimitsAndAuth(t *testing.T) {
	b := testBackend(t)
	_, srv := testProxy(t, b, nil, func(o *Options) { o.APIKey, o.MaxBodyBytes = "sk-right", 512 })
	ok := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 2}
	big := map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", 600)}}}
	tests := []struct {
		name    string
		path    string
		headers map[string]string
		body    any
		status  int
	}{
		{"the right key", "/v1/chat/completions", map[string]string{"Authorization": "Bearer sk-right"}, ok, http.StatusOK},
		{"no key", "/v1/chat/completions", nil, ok, http.StatusUnauthorized},
		{"a wrong key", "/v1/chat/completions", map[string]string{"Authorization": "Bearer sk-wrong"}, ok, http.StatusUnauthorized},
		{"a body over the limit", "/v1/chat/completions", map[string]string{"Authorization": "Bearer sk-right"}, big, http.StatusRequestEntityTooLarge},
		{"management without the secret", "/v1/omar/sessions/x/reward", map[string]string{"Authorization": "Bearer sk-right"}, map[string]any{"reward": 1}, http.StatusUnauthorized},
		{"management with the secret, unknown session", "/v1/omar/sessions/x/reward", map[string]string{"Authorization": "Bearer proxy-test-secret-0123"}, map[string]any{"reward": 1}, http.StatusConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := post(t, srv.URL+tc.path, tc.headers, tc.body)
			if code != tc.status {
				t.Fatalf("status %d (%s), want %d", code, resp, tc.status)
			}
			if code != http.StatusOK {
				var eb ErrorBody
				decodeStrictly(t, resp, &eb)
				if eb.Error == nil || eb.Error.Message == "" {
					t.Errorf("error body %s", resp)
				}
			}
		})
	}
}

// TestDeltas checks how a reply is split over its tokens' chunks.
func TestDeltas(t *testing.T) {
	tests := []struct {
		name          string
		content, text string
		vis           []string
		want          []string
	}{
		{"one piece per token", "abc", "abc", []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"an end-of-turn token adds nothing", "ab", "ab", []string{"a", "b", ""}, []string{"a", "b", ""}},
		{"cut before a stop string", "ab", "abEND", []string{"a", "b", "EN", "D"}, []string{"a", "b", "", ""}},
		{"a character split over tokens waits for its last byte", "é!", "é!", []string{"\xc3", "\xa9", "!"}, []string{"", "é", "!"}},
		{"pieces that are not the text", "xyz", "xyz", []string{"x", "q"}, []string{"", "xyz"}},
		{"no tokens", "", "", nil, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := deltas(tc.content, tc.text, tc.vis)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
