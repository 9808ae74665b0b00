package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/export"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
	"github.com/parquet-go/parquet-go"
)

// chatAgent is an external agent as a framework would write one: it keeps
// its own chat history and asks an OpenAI-compatible endpoint for every
// move, naming its episode and seat so that the proxy can reward it.
type chatAgent struct {
	url     string
	episode string
	seat    remote.SeatInfo
	history []map[string]any
	seen    int
}

func (a *chatAgent) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	if a.history == nil {
		a.history = []map[string]any{{"role": "system", "content": "You play " + a.seat.Name + ". Answer with your move only."}}
	}
	// The tiny test model's context is short: the agent shows it what
	// the other side said and the question, not the whole briefing.
	var news []string
	for _, ev := range t.View[a.seen:] {
		if (ev.Kind == engine.KindAction || ev.Kind == engine.KindObservation) && ev.Seat != a.seat.Index && ev.Text != "" {
			news = append(news, ev.Text)
		}
	}
	a.seen = len(t.View)
	news = append(news, firstLine(t.Notification.Text))
	a.history = append(a.history, map[string]any{"role": "user", "content": strings.Join(news, "\n")})
	body, err := json.Marshal(map[string]any{
		"model": "omar", "messages": a.history, "max_tokens": 16, "temperature": 1,
		"seed": 1000*a.seat.Index + len(a.history), "grammar": t.Notification.Grammar,
	})
	if err != nil {
		return engine.Action{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return engine.Action{}, err
	}
	req.Header.Set(HeaderEpisode, a.episode)
	req.Header.Set(HeaderSeat, strconv.Itoa(a.seat.Index))
	req.Header.Set(HeaderSeatToken, a.seat.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return engine.Action{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return engine.Action{}, err
	}
	var cc ChatCompletion
	if err := json.Unmarshal(data, &cc); err != nil || resp.StatusCode != http.StatusOK || len(cc.Choices) != 1 {
		return engine.Action{}, fmt.Errorf("proxy answered %d: %s", resp.StatusCode, data)
	}
	reply := *cc.Choices[0].Message.Content
	a.history = append(a.history, map[string]any{"role": "assistant", "content": reply})
	return engine.Action{NotificationID: t.Notification.ID, Text: reply}, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// engineServer serves the engine's HTTP API for the test.
func engineServer(t *testing.T) (*remote.Client, string) {
	t.Helper()
	o := remote.ServerOptions{}.Defaults()
	o.Secret = "engine-test-secret-0123"
	o.ActionTimeout = 10 * time.Second
	srv, err := remote.NewServer(t.Context(), envs.Find, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &remote.Client{BaseURL: hs.URL, Secret: o.Secret}, hs.URL
}

// TestProxyEpisodeTrains plays a Craigslist episode whose two seats are
// external agents calling the proxy, checks that the watcher turns each
// seat's session into a valid trajectory carrying the seat's reward, and
// runs one PPO step on them.
func TestProxyEpisodeTrains(t *testing.T) {
	b := testBackend(t)
	client, engineURL := engineServer(t)
	p, ps := testProxy(t, b, client, func(o *Options) {
		o.Poll = 20 * time.Millisecond
		o.Games = envs.Find
	})
	ctx := t.Context()
	seed := uint64(17)
	info, err := client.Create(ctx, remote.CreateRequest{Env: "craigslist_v1", Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(info.Seats))
	for i, si := range info.Seats {
		seat := &remote.Seat{Client: &remote.Client{BaseURL: engineURL}, Episode: info.ID, Info: si,
			Agent: &chatAgent{url: ps.URL, episode: info.ID, seat: si}, Wait: time.Second}
		wg.Go(func() { errs[i] = seat.Run(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("seat %d: %v", i, err)
		}
	}
	final, err := client.Episode(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != "done" || final.Outcome == nil {
		t.Fatalf("episode %s: status %s (%s)", info.ID, final.Status, final.Error)
	}
	var trajs []selfplay.Trajectory
	deadline := time.Now().Add(10 * time.Second)
	for len(trajs) < len(info.Seats) && time.Now().Before(deadline) {
		trajs = append(trajs, p.Trajectories()...)
		time.Sleep(20 * time.Millisecond)
	}
	if len(trajs) != len(info.Seats) {
		t.Fatalf("got %d trajectories, want %d (one per seat, each one segment)", len(trajs), len(info.Seats))
	}
	for _, tr := range trajs {
		if err := tr.Validate(); err != nil {
			t.Fatal(err)
		}
		if want := final.Outcome.Rewards[tr.Seat]; tr.Reward != want {
			t.Errorf("seat %d: reward %v, outcome %v", tr.Seat, tr.Reward, want)
		}
		t.Logf("seat %d (%s): %d tokens, %d generated over %d turns, segment %d, reward %.3f", tr.Seat, tr.Role, len(tr.Tokens), tr.Generated(), len(tr.TurnEnds), tr.Segment, tr.Reward)
		if tr.Segment != 0 || len(tr.TurnEnds) < 2 {
			t.Errorf("seat %d: segment %d with %d turns: want every turn in one stream", tr.Seat, tr.Segment, len(tr.TurnEnds))
		}
		if tr.Env != "craigslist_v1" || uint64(tr.Seed) != seed || tr.Role == "" || tr.Generated() == 0 {
			t.Errorf("seat %d: env %q seed %d role %q, %d generated tokens", tr.Seat, tr.Env, tr.Seed, tr.Role, tr.Generated())
		}
	}
	if trajs[0].Role == trajs[1].Role {
		t.Errorf("both seats have role %q: the game's roles differ", trajs[0].Role)
	}
	if again, err := p.EndEpisode(ctx, info.ID); err != nil || len(again) != 0 {
		t.Errorf("ending the episode again: %d trajectories, %v; want none", len(again), err)
	}

	t.Run("one PPO step", func(t *testing.T) {
		o := train.Options{}.Defaults()
		o.LibDir = llamatest.LibDir()
		tr, err := train.New(tinyModel(t), o)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		seqs, kept := loop.Sequences(trajs)
		if len(seqs) != len(trajs) {
			t.Fatalf("loop.Sequences kept %d of %d trajectories", len(seqs), len(trajs))
		}
		scores, err := tr.Evaluate(ctx, seqs)
		if err != nil {
			t.Fatal(err)
		}
		est, err := advantage.New("hierarchical", advantage.Params{}.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		in := advantage.Input{}
		for j, i := range kept {
			in.Samples = append(in.Samples, selfplay.SampleOf(&trajs[i], scores[j].Values))
		}
		adv, err := est.Estimate(in)
		if err != nil {
			t.Fatal(err)
		}
		for j := range seqs {
			s := &seqs[j]
			s.OldLogprobs, s.OldValues, s.RefLogprobs = scores[j].Logprobs, scores[j].Values, scores[j].RefLogprobs
			s.Advantages, s.Returns = adv.Advantages[j], adv.Returns[j]
		}
		st, err := tr.Step(ctx, seqs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PPO step: %d trained tokens, %d optimizer steps, approx KL %.4g", st.TrainedTokens, st.OptimizerSteps, st.ApproxKL)
		if st.TrainedTokens == 0 || st.OptimizerSteps == 0 {
			t.Errorf("trained %d tokens in %d optimizer steps: want some", st.TrainedTokens, st.OptimizerSteps)
		}
		// The trainer's logprobs of the sampled tokens are those the
		// backend reported (F32 cache, same weights): the ids are exact.
		for j, i := range kept {
			for k, on := range trajs[i].Mask {
				if on && !nearTol(trajs[i].RawLogprobs[k], scores[j].Logprobs[k], 1e-3) {
					t.Fatalf("seat %d token %d: backend logprob %v, trainer %v", trajs[i].Seat, k, trajs[i].RawLogprobs[k], scores[j].Logprobs[k])
				}
			}
		}
	})

	t.Run("parquet", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteParquet(ctx, &buf, trajs); err != nil {
			t.Fatal(err)
		}
		rows, err := parquet.Read[export.TrajectoryRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(trajs) {
			t.Fatalf("read %d rows, wrote %d", len(rows), len(trajs))
		}
		for i := range rows {
			got := rows[i].Trajectory()
			if !sameTrajectory(&got, &trajs[i]) {
				t.Errorf("row %d reads back as %+v, want %+v", i, got, trajs[i])
			}
		}
	})
}

func nearTol(a, b float32, tol float64) bool {
	d := float64(a - b)
	return d <= tol && d >= -tol
}

// sameTrajectory compares trajectories by their JSON (the stored fields).
func sameTrajectory(a, b *selfplay.Trajectory) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// TestTieNeedsTheSeatToken checks that a call cannot claim a seat (and its
// reward) without the seat's bearer token, and that one seat cannot be
// claimed by two sessions.
func TestTieNeedsTheSeatToken(t *testing.T) {
	b := testBackend(t)
	client, _ := engineServer(t)
	_, ps := testProxy(t, b, client, nil)
	ctx := t.Context()
	info, err := client.Create(ctx, remote.CreateRequest{Env: "casino_v1"})
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 2}
	tie := func(session string, seat int, token string) map[string]string {
		h := map[string]string{HeaderEpisode: info.ID, HeaderSeat: strconv.Itoa(seat), HeaderSeatToken: token}
		if session != "" {
			h[HeaderSession] = session
		}
		return h
	}
	tests := []struct {
		name    string
		headers map[string]string
		status  int
		param   string
	}{
		{"another seat's token", tie("a", 0, info.Seats[1].Token), http.StatusForbidden, HeaderSeatToken},
		{"a made-up token", tie("a", 0, "0123456789abcdef"), http.StatusForbidden, HeaderSeatToken},
		{"no token", map[string]string{HeaderEpisode: info.ID, HeaderSeat: "0"}, http.StatusBadRequest, HeaderSeatToken},
		{"a seat that is not a number", map[string]string{HeaderEpisode: info.ID, HeaderSeat: "x", HeaderSeatToken: "t"}, http.StatusBadRequest, HeaderSeat},
		{"an unknown episode", map[string]string{HeaderEpisode: "ep999", HeaderSeat: "0", HeaderSeatToken: "t"}, http.StatusForbidden, HeaderSeatToken},
		{"the seat's own token", tie("a", 0, info.Seats[0].Token), http.StatusOK, ""},
		{"the seat's token, another key: the seat's session", tie("b", 0, info.Seats[0].Token), http.StatusOK, ""},
		{"the tied seat, another seat's token", tie("", 0, info.Seats[1].Token), http.StatusForbidden, HeaderSeatToken},
		{"no session key: one per seat", tie("", 1, info.Seats[1].Token), http.StatusOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := post(t, ps.URL+"/v1/chat/completions", tc.headers, body)
			if tc.status == http.StatusOK {
				if code != http.StatusOK {
					t.Fatalf("status %d (%s), want 200", code, resp)
				}
				return
			}
			checkError(t, code, resp, tc.status, tc.param)
		})
	}
}

// sessionCount is the number of sessions p holds.
func sessionCount(p *Proxy) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// TestNoTokenNoSeatData: a call without a seat's token cannot create,
// name, append to or pre-create a seat's session, and a refused call
// leaves no session (issue 52, defects 2 and 3). Before, X-Omar-Session:
// episode/ID/seat/0 or the user field appended an attacker's calls to the
// seat's trajectories, and 403s still created sessions.
func TestNoTokenNoSeatData(t *testing.T) {
	b := testBackend(t)
	client, _ := engineServer(t)
	p, ps := testProxy(t, b, client, nil)
	ctx := t.Context()
	info, err := client.Create(ctx, remote.CreateRequest{Env: "casino_v1"})
	if err != nil {
		t.Fatal(err)
	}
	seatKey := "episode/" + info.ID + "/seat/0"
	msg := func(text string) map[string]any {
		return map[string]any{"messages": []map[string]any{{"role": "user", "content": text}}, "max_tokens": 2}
	}
	url := ps.URL + "/v1/chat/completions"
	seat0 := map[string]string{HeaderEpisode: info.ID, HeaderSeat: "0", HeaderSeatToken: info.Seats[0].Token}

	attacks := []struct {
		name    string
		headers map[string]string
		body    map[string]any
		status  int
	}{
		{"the seat's key as X-Omar-Session", map[string]string{HeaderSession: seatKey}, msg("evil"), http.StatusBadRequest},
		{"the seat's key as user", nil, func() map[string]any { m := msg("evil"); m["user"] = seatKey; return m }(), http.StatusBadRequest},
		{"a future episode's seat", map[string]string{HeaderSession: "episode/ep-future/seat/0"}, msg("evil"), http.StatusBadRequest},
		{"the seat with another seat's token", map[string]string{HeaderEpisode: info.ID, HeaderSeat: "0", HeaderSeatToken: info.Seats[1].Token}, msg("evil"), http.StatusForbidden},
		{"the seat with a made-up token", map[string]string{HeaderEpisode: info.ID, HeaderSeat: "0", HeaderSeatToken: "0123456789abcdef"}, msg("evil"), http.StatusForbidden},
		{"a made-up episode", map[string]string{HeaderEpisode: "ep-0123", HeaderSeat: "0", HeaderSeatToken: "0123456789abcdef"}, msg("evil"), http.StatusForbidden},
	}
	run := func(t *testing.T) {
		for _, a := range attacks {
			t.Run(a.name, func(t *testing.T) {
				code, resp := post(t, url, a.headers, a.body)
				if code != a.status {
					t.Fatalf("got HTTP %d (%s), want %d", code, resp, a.status)
				}
			})
		}
	}
	t.Run("before the seat's first call", func(t *testing.T) {
		run(t)
		if n := sessionCount(p); n != 0 {
			t.Errorf("refused calls left %d sessions, want none", n)
		}
	})
	if code, resp := post(t, url, seat0, msg("hello")); code != http.StatusOK {
		t.Fatalf("the seat's own call: HTTP %d (%s)", code, resp)
	}
	t.Run("after the seat tied", func(t *testing.T) {
		run(t)
		if n := sessionCount(p); n != 1 {
			t.Errorf("refused calls left %d sessions, want only the seat's", n)
		}
	})
	if code, resp := post(t, url, seat0, msg("again")); code != http.StatusOK {
		t.Fatalf("the seat's second call: HTTP %d (%s)", code, resp)
	}
	rec, err := p.Session(ctx, seatKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Calls) != 2 || rec.Tie == nil || rec.Tie.Seat != 0 {
		t.Errorf("the seat's session has %d calls (tie %+v), want the seat's own 2", len(rec.Calls), rec.Tie)
	}
}

// TestUntiedFloodKeepsSeats: a client that floods the proxy with untied
// sessions evicts only its own, never a seat's session, and a refused
// call does not count (issue 52, defect 3: 4,200 refused calls evicted
// the honest seat's session).
func TestUntiedFloodKeepsSeats(t *testing.T) {
	b := testBackend(t)
	client, _ := engineServer(t)
	p, ps := testProxy(t, b, client, func(o *Options) { o.MaxSessions, o.MaxClientSessions = 4, 3 })
	ctx := t.Context()
	info, err := client.Create(ctx, remote.CreateRequest{Env: "casino_v1"})
	if err != nil {
		t.Fatal(err)
	}
	url := ps.URL + "/v1/chat/completions"
	body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 1}
	seat0 := map[string]string{HeaderEpisode: info.ID, HeaderSeat: "0", HeaderSeatToken: info.Seats[0].Token}
	if code, resp := post(t, url, seat0, body); code != http.StatusOK {
		t.Fatalf("the seat's call: HTTP %d (%s)", code, resp)
	}
	for i := range 200 {
		code, _ := post(t, url, map[string]string{HeaderEpisode: info.ID, HeaderSeat: "0", HeaderSeatToken: fmt.Sprintf("%032d", i)}, body)
		if code != http.StatusForbidden {
			t.Fatalf("a wrong token: HTTP %d, want 403", code)
		}
	}
	for i := range 12 {
		if code, resp := post(t, url, map[string]string{HeaderSession: fmt.Sprintf("flood-%d", i)}, body); code != http.StatusOK {
			t.Fatalf("untied session %d: HTTP %d (%s)", i, code, resp)
		}
	}
	rec, err := p.Session(ctx, "episode/"+info.ID+"/seat/0")
	if err != nil {
		t.Fatalf("the seat's session is gone after the flood: %v", err)
	}
	if len(rec.Calls) != 1 {
		t.Errorf("the seat's session has %d calls, want 1", len(rec.Calls))
	}
	if n := sessionCount(p); n != 1+3 {
		t.Errorf("got %d sessions, want the seat's and the flooding client's last 3", n)
	}
	if st := p.Stats(); st.Evicted != 9 {
		t.Errorf("got %d evictions, want 9 (the flood's own sessions beyond 3)", st.Evicted)
	}
}

// TestClientByteBudget: a client's untied sessions share MaxClientBytes;
// a new session evicts the client's own older one, and a call that could
// not fit at all is refused without evicting anything.
func TestClientByteBudget(t *testing.T) {
	b := testBackend(t)
	p, ps := testProxy(t, b, nil, func(o *Options) { o.MaxClientBytes = 1000 }) // a small call records about 560 bytes
	ctx := t.Context()
	url := ps.URL + "/v1/chat/completions"
	small := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 1}
	for _, key := range []string{"first", "second"} {
		if code, resp := post(t, url, map[string]string{HeaderSession: key}, small); code != http.StatusOK {
			t.Fatalf("session %s: HTTP %d (%s)", key, code, resp)
		}
	}
	if _, err := p.Session(ctx, "first"); err == nil {
		t.Error("the first session is still held: want it evicted for the second within the client's bytes")
	}
	if _, err := p.Session(ctx, "second"); err != nil {
		t.Errorf("the second session: %v", err)
	}
	large := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 64}
	code, resp := post(t, url, map[string]string{HeaderSession: "third"}, large)
	checkError(t, code, resp, http.StatusTooManyRequests, "")
	if !strings.Contains(string(resp), "client_bytes") {
		t.Errorf("got %s, want code client_bytes", resp)
	}
	if _, err := p.Session(ctx, "second"); err != nil {
		t.Errorf("a refused call evicted the second session: %v", err)
	}
	if _, err := p.Session(ctx, "third"); err == nil {
		t.Error("the refused call left its session")
	}
}
