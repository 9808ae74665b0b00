package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/werewolf"
)

func find(id string) (engine.Game, error) {
	if id == "sealedbid" || id == "sealedbid_v1" {
		return sealedbid.New(), nil
	}
	return nil, fmt.Errorf("unknown environment %q", id)
}

// testSecret is the secret of the test servers.
const testSecret = "test-secret-0123456789"

// newTestServer starts a server with testSecret and returns a client
// holding the secret (the operator's).
func newTestServer(t *testing.T, opts ServerOptions) (*Client, *httptest.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if opts.Secret == "" {
		opts.Secret = testSecret
	}
	s, err := NewServer(ctx, find, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { cancel(); ts.Close() })
	return &Client{BaseURL: ts.URL, HTTP: ts.Client(), Secret: opts.Secret}, ts
}

func ptr[T any](v T) *T { return &v }

func shading(seat engine.Seat, seed uint64) engine.Agent {
	p, _ := engine.FindPolicy(sealedbid.New(), "shading")
	return p.New(seat, seed)
}

func waitDone(t *testing.T, c *Client, id string) EpisodeInfo {
	t.Helper()
	for range 500 {
		info, err := c.Episode(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != "running" {
			return info
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("episode %s did not finish", id)
	return EpisodeInfo{}
}

// TestRemoteEqualsLocal plays episodes whose seats are all remote clients
// and checks that each ends exactly as the same episode played in-process.
// Fast clients answer simultaneous notifications before the runtime has
// called their seat's agent; those answers must be taken, not refused.
func TestRemoteEqualsLocal(t *testing.T) {
	opts := ServerOptions{}.Defaults()
	opts.ActionTimeout = 5 * time.Second // a refused answer would show up as a default
	c, _ := newTestServer(t, opts)
	params := engine.Params{"bidders": 5, "rounds": 3}
	for seed := uint64(1); seed <= 8; seed++ {
		info, err := c.Create(context.Background(), CreateRequest{Env: "sealedbid", Seed: ptr(seed), Params: params})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(info.Seats))
		for i, si := range info.Seats {
			seat := &Seat{Client: c, Episode: info.ID, Info: si, Agent: shading(engine.Seat{Index: i}, 0), Wait: time.Second}
			wg.Go(func() { errs[i] = seat.Run(context.Background()) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("seed %d seat %d: %v", seed, i, err)
			}
		}
		got := waitDone(t, c, info.ID)
		cast, _ := engine.ScriptedCast(sealedbid.New(), []string{"shading"}, seed)
		want, err := engine.Play(context.Background(), sealedbid.New(), seed, params, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "done" || !reflect.DeepEqual(got.Outcome.Rewards, want.Outcome.Rewards) {
			t.Fatalf("seed %d: remote episode: status %s outcome %+v; local rewards %v", seed, got.Status, got.Outcome, want.Outcome.Rewards)
		}
	}
}

// flaky answers its first notification with an invalid bid and loses its
// connection while the second is open (it blocks until its context ends).
type flaky struct {
	inner engine.Agent
	calls int
	seen  []string
	lost  chan struct{} // closed when the connection should drop
}

func (f *flaky) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	f.calls++
	f.seen = append(f.seen, t.Notification.ID)
	switch f.calls {
	case 1:
		return engine.Action{NotificationID: t.Notification.ID, Text: "BID 999"}, nil
	case 2:
		close(f.lost)
		<-ctx.Done()
		return engine.Action{}, ctx.Err()
	}
	return f.inner.Act(ctx, t)
}

// TestRemoteEpisode plays over loopback HTTP with an invalid action, a
// stale action, a disconnect and a resume.
func TestRemoteEpisode(t *testing.T) {
	c, ts := newTestServer(t, ServerOptions{}.Defaults())
	info, err := c.Create(context.Background(), CreateRequest{Env: "sealedbid_v1", Seed: ptr[uint64](5), Agents: []string{"remote", "remote", "scripted:random"}, Params: engine.Params{"rounds": 4}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Seats[2].Agent != "scripted:random" || info.Seats[2].Token == "" || info.ObserverToken == "" {
		t.Fatalf("create answer: %+v", info)
	}
	s0 := &Seat{Client: c, Episode: info.ID, Info: info.Seats[0], Agent: shading(engine.Seat{Index: 0}, 0), Wait: time.Second}
	f := &flaky{inner: shading(engine.Seat{Index: 1}, 0), lost: make(chan struct{})}
	s1 := &Seat{Client: c, Episode: info.ID, Info: info.Seats[1], Agent: f, Wait: time.Second}

	done0 := make(chan error, 1)
	go func() { done0 <- s0.Run(context.Background()) }()

	// Seat 1 plays until its second notification, then drops the connection.
	ctx1, drop := context.WithCancel(context.Background())
	go func() {
		<-f.lost
		drop()
	}()
	if err := s1.Run(ctx1); !errors.Is(err, context.Canceled) {
		t.Fatalf("first connection: got %v, want a cancelled context", err)
	}
	// A stale action (the first, already answered notification) is refused.
	_, err = c.Act(context.Background(), info.ID, info.Seats[1].Token, engine.Action{NotificationID: f.seen[0], Text: "BID 1"})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusConflict || !strings.Contains(se.Message, "stale") {
		t.Fatalf("stale action: got %v, want 409 stale", err)
	}
	// Resume from the cursor.
	if err := s1.Run(context.Background()); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if len(f.seen) < 3 || f.seen[2] != f.seen[1] {
		t.Errorf("after resuming, seat 1 answered %v; want the notification open at the disconnect (%v) again", f.seen, f.seen[1])
	}
	if err := <-done0; err != nil {
		t.Fatalf("seat 0: %v", err)
	}
	got := waitDone(t, c, info.ID)
	if got.Status != "done" || len(got.Outcome.Rewards) != 3 {
		t.Fatalf("episode ended %+v", got)
	}
	// The invalid bid is in seat 1's view, and the cursor never skipped or
	// repeated an event.
	var invalid int
	for i, e := range s1.View {
		if e.Kind == engine.KindValidationError {
			invalid++
		}
		if i > 0 && e.Seq <= s1.View[i-1].Seq {
			t.Fatalf("seat 1 view not increasing at %d: %d after %d", i, e.Seq, s1.View[i-1].Seq)
		}
	}
	if invalid != 1 {
		t.Errorf("seat 1 saw %d validation errors, want 1", invalid)
	}
	page, err := c.Events(context.Background(), info.ID, 1, info.Seats[1].Token, 0, 0)
	if err != nil || !reflect.DeepEqual(len(page.Events), len(s1.View)) || !page.Done {
		t.Errorf("re-reading seat 1 from 0: %d events (done %v, %v), resumed view has %d", len(page.Events), page.Done, err, len(s1.View))
	}
	// The observer sees everything; no seat sees another's private events.
	all, err := c.Events(context.Background(), info.ID, -1, info.ObserverToken, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s1.View {
		if !e.Audience.Includes(1) {
			t.Errorf("seat 1 received event %d for %+v", e.Seq, e.Audience)
		}
	}
	if len(all.Events) <= len(s1.View) {
		t.Errorf("observer saw %d events, seat 1 %d", len(all.Events), len(s1.View))
	}

	// Bad requests get clear 4xx answers.
	for _, tc := range []struct {
		name, method, path, token, body string
		code                            int
	}{
		{"unknown episode", "GET", "/v1/episodes/nope/events?seat=0", info.Seats[0].Token, "", 404},
		{"no token", "GET", "/v1/episodes/" + info.ID + "/events?seat=0", "", "", 401},
		{"other seat's token", "GET", "/v1/episodes/" + info.ID + "/events?seat=1", info.Seats[0].Token, "", 403},
		{"seat token reads all", "GET", "/v1/episodes/" + info.ID + "/events", info.Seats[0].Token, "", 403},
		{"bad seat", "GET", "/v1/episodes/" + info.ID + "/events?seat=9", info.Seats[0].Token, "", 400},
		{"bad cursor", "GET", "/v1/episodes/" + info.ID + "/events?seat=0&after=-3", info.Seats[0].Token, "", 400},
		{"bad json", "POST", "/v1/episodes/" + info.ID + "/actions", info.Seats[0].Token, "{", 400},
		{"unknown field", "POST", "/v1/episodes/" + info.ID + "/actions", info.Seats[0].Token, `{"notification_id":"n1","action":"x","seat":1}`, 400},
		{"no notification id", "POST", "/v1/episodes/" + info.ID + "/actions", info.Seats[0].Token, `{"action":"BID 1"}`, 400},
		{"observer cannot act", "POST", "/v1/episodes/" + info.ID + "/actions", info.ObserverToken, `{"notification_id":"n1","action":"BID 1"}`, 403},
		{"scripted seat cannot act", "POST", "/v1/episodes/" + info.ID + "/actions", info.Seats[2].Token, `{"notification_id":"n1","action":"BID 1"}`, 403},
		{"episode over", "POST", "/v1/episodes/" + info.ID + "/actions", info.Seats[0].Token, `{"notification_id":"n1","action":"BID 1"}`, 409},
		{"too large", "POST", "/v1/episodes", testSecret, `{"env":"` + strings.Repeat("x", 70<<10) + `"}`, 413},
		{"unknown env", "POST", "/v1/episodes", testSecret, `{"env":"chess"}`, 400},
		{"bad params", "POST", "/v1/episodes", testSecret, `{"env":"sealedbid","params":{"bidders":1}}`, 400},
		{"wrong agent count", "POST", "/v1/episodes", testSecret, `{"env":"sealedbid","agents":["remote","remote"]}`, 400},
		{"unknown policy", "POST", "/v1/episodes", testSecret, `{"env":"sealedbid","agents":["scripted:genius"]}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("got HTTP %d, want %d", resp.StatusCode, tc.code)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got content type %q, want application/json", ct)
			}
		})
	}
}

// TestRemoteTimeout: a remote seat that never answers gets the default
// and the episode goes on.
func TestRemoteTimeout(t *testing.T) {
	opts := ServerOptions{}.Defaults()
	opts.ActionTimeout = 20 * time.Millisecond
	c, _ := newTestServer(t, opts)
	info, err := c.Create(context.Background(), CreateRequest{Env: "sealedbid", Seed: ptr[uint64](1), Agents: []string{"remote", "scripted", "scripted"}, Params: engine.Params{"rounds": 2}})
	if err != nil {
		t.Fatal(err)
	}
	got := waitDone(t, c, info.ID)
	if got.Status != "done" {
		t.Fatalf("got status %s (%s), want done", got.Status, got.Error)
	}
	page, err := c.Events(context.Background(), info.ID, 0, info.Seats[0].Token, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defaults := 0
	for _, e := range page.Events {
		if e.Kind == engine.KindDefault {
			defaults++
		}
	}
	if defaults != 2 {
		t.Errorf("got %d defaults, want one per round (2)", defaults)
	}
}

func TestParseEventsQuery(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want EventsQuery
		err  bool
	}{
		{"", EventsQuery{Seat: -1}, false},
		{"seat=1&after=7&wait=2.5", EventsQuery{Seat: 1, After: 7, Wait: 2500 * time.Millisecond}, false},
		{"wait=999", EventsQuery{Seat: -1, Wait: 30 * time.Second}, false},
		{"seat=3", EventsQuery{}, true},
		{"seat=-1", EventsQuery{}, true},
		{"after=x", EventsQuery{}, true},
		{"wait=NaN", EventsQuery{}, true},
		{"wait=-1", EventsQuery{}, true},
	} {
		v, _ := url.ParseQuery(tc.q)
		got, err := ParseEventsQuery(v, 3, 30*time.Second)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("%q: got %+v, %v; want %+v, error %v", tc.q, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseEventsQuery(f *testing.F) {
	for _, s := range []string{"", "seat=1&after=7&wait=2.5", "after=9223372036854775807", "wait=1e309", "seat=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := url.ParseQuery(s)
		if err != nil {
			return
		}
		q, err := ParseEventsQuery(v, 4, 30*time.Second)
		if err != nil {
			return
		}
		if q.Seat < -1 || q.Seat >= 4 || q.After < 0 || q.Wait < 0 || q.Wait > 30*time.Second {
			t.Fatalf("%q parsed to out-of-range %+v", s, q)
		}
	})
}

func FuzzDecodeAction(f *testing.F) {
	for _, s := range []string{`{"notification_id":"n1","action":"BID 3"}`, `{}`, `{"action":1}`, `{"x":1}`, `{"notification_id":"n1"} {}`, ``, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a ActionRequest
		if err := DecodeStrict(strings.NewReader(s), &a); err != nil {
			return
		}
		// Whatever decodes must re-encode to an equivalent request.
		var b ActionRequest
		if err := DecodeStrict(strings.NewReader(fmt.Sprintf(`{"notification_id":%q,"action":%q}`, a.NotificationID, a.Action)), &b); err != nil || a != b {
			t.Fatalf("%q decoded to %+v, which does not round-trip (%+v, %v)", s, a, b, err)
		}
	})
}

// TestCreateAllScriptedNoRace: an episode whose seats are all scripted can
// finish before create has written its answer; the answer must not read
// the episode's info while the episode's goroutine writes it (run with
// -race).
func TestCreateAllScriptedNoRace(t *testing.T) {
	c, _ := newTestServer(t, ServerOptions{}.Defaults())
	for seed := range uint64(20) {
		info, err := c.Create(context.Background(), CreateRequest{Env: "sealedbid", Seed: ptr(seed), Agents: []string{"scripted"}, Params: engine.Params{"rounds": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if info.ID == "" || len(info.Seats) == 0 {
			t.Fatalf("create answered %+v", info)
		}
		if got := waitDone(t, c, info.ID); got.Status != "done" {
			t.Errorf("episode %s: status %q (%s), want done", info.ID, got.Status, got.Error)
		}
	}
}

// findAll also serves werewolf, whose seed deals hidden roles.
func findAll(id string) (engine.Game, error) {
	if name, _ := engine.SplitID(id); name == "werewolf" {
		return werewolf.New(), nil
	}
	return find(id)
}

// TestCloneAttack replays the attack of issue 12: a client without the
// server's secret lists the episodes, learns a running werewolf game's
// seed, deals the same seed locally and reads every hidden role. None of
// the steps may work: listing and creating need the secret, and no answer
// without it (nor with a seat's or the observer's token) carries the seed.
func TestCloneAttack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := ServerOptions{}.Defaults()
	opts.Secret = testSecret
	s, err := NewServer(ctx, findAll, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	operator := &Client{BaseURL: ts.URL, HTTP: ts.Client(), Secret: testSecret}
	// The operator starts a 7-seat game without choosing a seed.
	info, err := operator.Create(ctx, CreateRequest{Env: "werewolf", Params: engine.Params{"players": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Seed == nil {
		t.Fatal("the creator's answer has no seed, want the random seed it was dealt from")
	}
	other, err := operator.Create(ctx, CreateRequest{Env: "werewolf", Params: engine.Params{"players": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if *other.Seed == *info.Seed {
		t.Errorf("two unseeded episodes share seed %d, want random seeds", *info.Seed)
	}
	if got, err := operator.List(ctx); err != nil || len(got) != 2 || got[0].Seed == nil || *got[0].Seed != *info.Seed {
		t.Errorf("the operator's list = %+v, %v; want both episodes with their seeds", got, err)
	}

	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"wrong secret", testSecret + "x"},
		{"a seat's token", info.Seats[0].Token},
		{"the observer's token", info.ObserverToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attacker := &Client{BaseURL: ts.URL, HTTP: ts.Client(), Secret: tc.token}
			var se *StatusError
			if _, err := attacker.List(ctx); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
				t.Errorf("list: got %v, want HTTP 401", err)
			}
			seed := uint64(7)
			if _, err := attacker.Create(ctx, CreateRequest{Env: "werewolf", Seed: &seed}); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
				t.Errorf("create: got %v, want HTTP 401", err)
			}
			got, err := attacker.Episode(ctx, info.ID)
			if tc.name == "wrong secret" {
				// A token that is neither the secret nor one of the
				// episode's is refused, not read as no token.
				if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
					t.Errorf("GET with a wrong secret: got %v, want HTTP 401", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Seed != nil {
				t.Errorf("GET /v1/episodes/%s showed seed %d without the secret", info.ID, *got.Seed)
			}
			// Nothing in the raw answer names the seed either.
			req, _ := http.NewRequest("GET", ts.URL+"/v1/episodes/"+info.ID, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), `"seed"`) || strings.Contains(string(body), strconv.FormatUint(*info.Seed, 10)) {
				t.Errorf("answer %s reveals the seed", body)
			}
		})
	}
}

// TestCreateLimits: a client has at most MaxPerClient running episodes,
// and the server refuses a short secret.
func TestCreateLimits(t *testing.T) {
	opts := ServerOptions{}.Defaults()
	opts.MaxPerClient = 2
	c, _ := newTestServer(t, opts)
	ctx := context.Background()
	for k := range 3 {
		// Remote seats that never answer keep the episodes running.
		_, err := c.Create(ctx, CreateRequest{Env: "sealedbid", Agents: []string{"remote"}})
		var se *StatusError
		switch {
		case k < 2 && err != nil:
			t.Fatalf("create %d: %v", k, err)
		case k == 2 && (!errors.As(err, &se) || se.Code != http.StatusTooManyRequests):
			t.Fatalf("create %d: got %v, want HTTP 429", k, err)
		}
	}
	for _, tc := range []struct {
		secret string
		ok     bool
	}{{"", true}, {"short", false}, {strings.Repeat("s", MinSecretLen), true}} {
		o := ServerOptions{}.Defaults()
		o.Secret = tc.secret
		s, err := NewServer(ctx, find, o)
		if (err == nil) != tc.ok {
			t.Errorf("secret %q: err = %v, want ok %v", tc.secret, err, tc.ok)
		}
		if err == nil && len(s.Secret()) < MinSecretLen {
			t.Errorf("secret %q: server secret %q, want ≥ %d bytes", tc.secret, s.Secret(), MinSecretLen)
		}
	}
}

// echoAgents is an Agents of one name, "echo", whose seats reply with the
// first legal action; it records the episodes it was asked for.
type echoAgents struct {
	mu       sync.Mutex
	episodes []string
}

func (*echoAgents) Names() []string { return []string{"echo"} }

func (a *echoAgents) Agent(name string, g engine.Game, seat engine.Seat, seed uint64, episode string) (engine.Agent, string, error) {
	a.mu.Lock()
	a.episodes = append(a.episodes, episode)
	a.mu.Unlock()
	pol, err := engine.FindPolicy(g, "random")
	if err != nil {
		return nil, "", err
	}
	return pol.New(seat, seed), "echo:" + seat.Name, nil
}

// TestServerAgentsAndCatalog: GET /v1/envs lists the catalog and the agent
// names; a seat can be given to an Agents name; the secret reads the
// omniscient log and any seat's view and gets the tokens back, which
// nobody else does.
func TestServerAgentsAndCatalog(t *testing.T) {
	opts := ServerOptions{}.Defaults()
	opts.Catalog = []engine.Game{sealedbid.New()}
	ag := &echoAgents{}
	opts.Agents = ag
	c, ts := newTestServer(t, opts)
	ctx := context.Background()
	page, err := (&Client{BaseURL: ts.URL, HTTP: ts.Client()}).Envs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := page.Agents, []string{"remote", Me, "scripted", "echo"}; !reflect.DeepEqual(got, want) {
		t.Errorf("agents %v, want %v", got, want)
	}
	if len(page.Envs) != 1 || page.Envs[0].ID != sealedbid.New().ID() || len(page.Envs[0].Seats) == 0 || len(page.Envs[0].Policies) == 0 {
		t.Fatalf("envs %+v, want sealedbid with its seats and policies", page.Envs)
	}
	if _, err := c.Create(ctx, CreateRequest{Env: "sealedbid", Agents: []string{"nobody"}}); err == nil {
		t.Error("an unknown agent name was taken")
	}
	info, err := c.Create(ctx, CreateRequest{Env: "sealedbid", Seed: ptr(uint64(3)), Agents: []string{"echo", "scripted", "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Seats[0].Agent, "echo:"+info.Seats[0].Name; got != want {
		t.Errorf("seat 0 agent %q, want %q", got, want)
	}
	if !slices.Contains(ag.episodes, info.ID) {
		t.Errorf("Agents was asked for episodes %v, want %s among them", ag.episodes, info.ID)
	}
	done := waitDone(t, c, info.ID)
	if done.Status != "done" {
		t.Fatalf("status %q (%s), want done", done.Status, done.Error)
	}
	if len(done.Seats) == 0 || done.Seats[0].Token != info.Seats[0].Token || done.ObserverToken != info.ObserverToken {
		t.Errorf("the secret's GET gave seats %+v observer %q, want the tokens of the create answer", done.Seats, done.ObserverToken)
	}
	other, err := (&Client{BaseURL: ts.URL, HTTP: ts.Client(), Secret: info.Seats[1].Token}).Episode(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if other.ObserverToken != "" || other.Seats[0].Token != "" {
		t.Errorf("a seat's token got tokens back: %+v", other)
	}
	all, err := c.Events(ctx, info.ID, -1, testSecret, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := c.Events(ctx, info.ID, -1, info.ObserverToken, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Events) == 0 || !reflect.DeepEqual(all.Events, obs.Events) {
		t.Errorf("the secret read %d events, the observer %d; want the same omniscient log", len(all.Events), len(obs.Events))
	}
	view, err := c.Events(ctx, info.ID, 1, testSecret, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.Events(ctx, info.ID, 1, info.Seats[1].Token, 0, 0)
	if err != nil || !reflect.DeepEqual(view.Events, own.Events) {
		t.Errorf("the secret's read of seat 1 differs from the seat's own view (err %v)", err)
	}
	var se *StatusError
	if _, err := c.Events(ctx, info.ID, 0, info.Seats[1].Token, 0, 0); !errors.As(err, &se) || se.Code != http.StatusForbidden {
		t.Errorf("seat 1's token reading seat 0: got %v, want HTTP 403", err)
	}
}

// TestEpisodeIDsUnguessable: ids are random, so a caller without the
// secret cannot enumerate episodes or name a future one (issue 52's
// defect 2); they were "ep1", "ep2", ….
func TestEpisodeIDsUnguessable(t *testing.T) {
	c, _ := newTestServer(t, ServerOptions{}.Defaults())
	ctx := context.Background()
	seen := map[string]bool{}
	for range 8 {
		info, err := c.Create(ctx, CreateRequest{Env: "sealedbid", Agents: []string{"remote"}})
		if err != nil {
			t.Fatal(err)
		}
		if seen[info.ID] {
			t.Fatalf("id %s drawn twice", info.ID)
		}
		seen[info.ID] = true
		hexPart, ok := strings.CutPrefix(info.ID, "ep-")
		if !ok || len(hexPart) < 24 {
			t.Errorf("got id %q, want ep- and at least 96 random bits in hex", info.ID)
		}
		for _, guess := range []string{"ep1", "ep2", "ep" + strconv.Itoa(len(seen))} {
			if info.ID == guess {
				t.Errorf("got id %q: a sequential id", info.ID)
			}
		}
	}
}

// TestGetEpisodeOutcomeNeedsToken: GET /v1/episodes/{id} shows the
// outcome only to the secret or a token of the episode; without a token
// it answers the status alone, and an unknown token is refused.
func TestGetEpisodeOutcomeNeedsToken(t *testing.T) {
	c, ts := newTestServer(t, ServerOptions{}.Defaults())
	ctx := context.Background()
	seed := uint64(3)
	info, err := c.Create(ctx, CreateRequest{Env: "sealedbid", Seed: &seed, Agents: []string{"scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, c, info.ID)
	if done.Outcome == nil {
		t.Fatalf("the episode ended %s without an outcome", done.Status)
	}
	get := func(token string) (int, EpisodeInfo) {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/episodes/"+info.ID, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got EpisodeInfo
		_ = json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got
	}
	for _, tc := range []struct {
		name, token string
		code        int
		outcome     bool
	}{
		{"no token", "", http.StatusOK, false},
		{"an unknown token", "0123456789abcdef0123456789abcdef", http.StatusUnauthorized, false},
		{"a seat's token", info.Seats[0].Token, http.StatusOK, true},
		{"the observer's token", info.ObserverToken, http.StatusOK, true},
		{"the secret", testSecret, http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, got := get(tc.token)
			if code != tc.code {
				t.Fatalf("got HTTP %d, want %d", code, tc.code)
			}
			if code != http.StatusOK {
				return
			}
			if got.Status != "done" {
				t.Errorf("got status %q, want done", got.Status)
			}
			if (got.Outcome != nil) != tc.outcome {
				t.Errorf("got outcome %+v, want shown: %v", got.Outcome, tc.outcome)
			}
		})
	}
}

// TestSeedAsString: the API writes seeds as decimal strings, exact above
// 2^53 (the page reads them with JavaScript), and takes a seed as a
// string or a number; a request body's unknown field is still refused.
func TestSeedAsString(t *testing.T) {
	c, ts := newTestServer(t, ServerOptions{}.Defaults())
	const big = uint64(18446744073709551315)
	post := func(body string) (int, map[string]any, []byte) {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/episodes", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m, b
	}
	for _, body := range []string{
		`{"env":"sealedbid","seed":"18446744073709551315","agents":["scripted"]}`,
		`{"env":"sealedbid","seed":18446744073709551315,"agents":["scripted"]}`,
	} {
		code, m, raw := post(body)
		if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", body, code, raw)
		}
		if m["seed"] != "18446744073709551315" {
			t.Errorf("%s: the answer's seed is %#v, want the string \"18446744073709551315\"", body, m["seed"])
		}
		info, err := c.Episode(context.Background(), m["id"].(string))
		if err != nil || info.Seed == nil || *info.Seed != big {
			t.Errorf("%s: the client read seed %v (%v), want %d", body, info.Seed, err, big)
		}
	}
	if code, _, raw := post(`{"env":"sealedbid","seed":"1","colour":"red"}`); code != http.StatusBadRequest {
		t.Errorf("an unknown field: HTTP %d %s, want 400", code, raw)
	}
	seed := big
	info, err := c.Create(context.Background(), CreateRequest{Env: "sealedbid", Seed: &seed, Agents: []string{"scripted"}})
	if err != nil || info.Seed == nil || *info.Seed != big {
		t.Fatalf("the Go client created seed %v (%v), want %d", info.Seed, err, big)
	}
	var old EpisodeInfo
	if err := json.Unmarshal([]byte(`{"id":"e1","env":"x","seed":18446744073709551315,"status":"done","seats":[]}`), &old); err != nil || old.Seed == nil || *old.Seed != big {
		t.Errorf("a numeric seed read as %v (%v), want %d", old.Seed, err, big)
	}
}

// TestEnvParams: the catalog lists a game's parameters with their
// defaults, and GET /v1/envs/{id} gives the seats for other parameters or
// the game's reason for refusing them.
func TestEnvParams(t *testing.T) {
	opts := ServerOptions{}.Defaults()
	opts.Catalog = []engine.Game{sealedbid.New()}
	_, ts := newTestServer(t, opts)
	page, err := (&Client{BaseURL: ts.URL, HTTP: ts.Client()}).Envs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := page.Envs[0].Params, engine.ParamsOf(sealedbid.DefaultParams()); !reflect.DeepEqual(got, want) {
		t.Errorf("sealedbid's parameters %v, want its defaults %v", got, want)
	}
	for _, tc := range []struct {
		query string
		code  int
		seats int
	}{
		{"", http.StatusOK, 3},
		{"?params=" + url.QueryEscape(`{"bidders":5}`), http.StatusOK, 5},
		{"?params=" + url.QueryEscape(`{"bidders":1}`), http.StatusBadRequest, 0},
		{"?params=" + url.QueryEscape(`{"colour":1}`), http.StatusBadRequest, 0},
		{"?params=" + url.QueryEscape(`[1]`), http.StatusBadRequest, 0},
	} {
		resp, err := ts.Client().Get(ts.URL + "/v1/envs/sealedbid" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var info EnvInfo
		_ = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if resp.StatusCode != tc.code || len(info.Seats) != tc.seats {
			t.Errorf("%q: HTTP %d with %d seats, want %d with %d", tc.query, resp.StatusCode, len(info.Seats), tc.code, tc.seats)
		}
	}
	if resp, err := ts.Client().Get(ts.URL + "/v1/envs/nothing"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown environment: %v %v, want 404", resp.StatusCode, err)
	}
}

// TestMeAndRecord: a seat given to "me" is a remote seat labelled me; a
// finished episode's record goes to the Finished hook before the episode
// reads as done, and GET /v1/episodes/{id}/record answers it to the
// secret and the observer token, not to a seat's token.
func TestMeAndRecord(t *testing.T) {
	opts := ServerOptions{}.Defaults()
	finished := make(chan *engine.Record, 1)
	opts.Finished = func(r *engine.Record) { finished <- r }
	c, ts := newTestServer(t, opts)
	ctx := context.Background()
	info, err := c.Create(ctx, CreateRequest{Env: "sealedbid", Seed: ptr(uint64(4)), Agents: []string{Me, "scripted", "scripted"}, Params: engine.Params{"rounds": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Seats[0].Agent != Me {
		t.Errorf("seat 0 is played by %q, want %q", info.Seats[0].Agent, Me)
	}
	get := func(token string) (int, []byte) {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/episodes/"+info.ID+"/record", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, _ := get(testSecret); code != http.StatusConflict {
		t.Errorf("the record of a running episode: HTTP %d, want 409", code)
	}
	seat := &Client{BaseURL: ts.URL, HTTP: ts.Client(), Secret: info.Seats[0].Token}
	var view []engine.Event
	var after int64
	answered := ""
	for {
		page, err := seat.Events(ctx, info.ID, 0, info.Seats[0].Token, after, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		view, after = append(view, page.Events...), page.Next
		if page.Done {
			break
		}
		if n := openNotification(view); n != nil && n.NotificationID != answered {
			answered = n.NotificationID
			if _, err := seat.Act(ctx, info.ID, info.Seats[0].Token, engine.Action{NotificationID: n.NotificationID, Text: "BID 10"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := waitDone(t, c, info.ID)
	var hooked *engine.Record
	select {
	case hooked = <-finished:
	default:
		t.Fatal("the episode reads as done before its record reached the hook")
	}
	if hooked.Seats[0].Agent != Me || hooked.Outcome.Result != done.Outcome.Result {
		t.Errorf("the hook's record: seat 0 %q result %q, want me and %q", hooked.Seats[0].Agent, hooked.Outcome.Result, done.Outcome.Result)
	}
	for _, tc := range []struct {
		who, token string
		code       int
	}{{"the secret", testSecret, 200}, {"the observer", info.ObserverToken, 200}, {"a seat", info.Seats[0].Token, 403}, {"nobody", "x", 403}} {
		code, b := get(tc.token)
		if code != tc.code {
			t.Errorf("%s: HTTP %d, want %d", tc.who, code, tc.code)
			continue
		}
		if code == 200 {
			rec, err := engine.DecodeRecord(b)
			if err != nil || rec.Seed != 4 || len(rec.Events) != len(hooked.Events) {
				t.Errorf("%s: record %v (%v), want the hook's", tc.who, rec, err)
			}
		}
	}
}
