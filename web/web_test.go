package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

const testSecret = "web-test-secret-0123456789"

// writeRecords plays n scripted episodes of env and writes their records.
func writeRecords(t *testing.T, env string, params engine.Params, n int) (string, []*engine.Record) {
	t.Helper()
	g, err := envs.Find(env)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "records.jsonl")
	w, err := jsonl.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*engine.Record
	for k := range n {
		seed := seeds.Derive(11, uint64(k))
		rec := enginetest.PlayScripted(t, g, seed, params)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path, recs
}

// newSite serves a site with an API server over every environment.
func newSite(t *testing.T, o Options, agents remote.Agents) (*httptest.Server, *Site) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := remote.ServerOptions{}.Defaults()
	opts.Secret, opts.Catalog, opts.Agents = testSecret, envs.All(), agents
	api, err := remote.NewServer(ctx, envs.Find, opts)
	if err != nil {
		t.Fatal(err)
	}
	o.API = api
	site, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(site)
	t.Cleanup(func() { cancel(); ts.Close() })
	return ts, site
}

func get(t *testing.T, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestWebPages: every page is served with the content policy and loads
// only the site's own scripts, which all exist; / leads to the episodes
// page.
func TestWebPages(t *testing.T) {
	ts, _ := newSite(t, Options{}, nil)
	for _, page := range []string{"/ui/", "/ui/episode", "/ui/replay", "/ui/dashboard"} {
		resp, body := get(t, ts.URL+page, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d", page, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != contentPolicy {
			t.Errorf("%s: content policy %q, want %q", page, got, contentPolicy)
		}
		if strings.Contains(string(body), "<script>") || strings.Contains(string(body), " on") && strings.Contains(string(body), "onclick=") {
			t.Errorf("%s has inline script, which the content policy blocks", page)
		}
		for _, src := range scriptSources(string(body)) {
			if r, _ := get(t, ts.URL+src, ""); r.StatusCode != 200 || !strings.Contains(r.Header.Get("Content-Type"), "javascript") {
				t.Errorf("%s: script %s: HTTP %d, %s", page, src, r.StatusCode, r.Header.Get("Content-Type"))
			}
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /: %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func scriptSources(html string) []string {
	var out []string
	for _, part := range strings.Split(html, `<script src="`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

// TestWebSecret: records and run data need the secret, the API's own
// rules hold behind the site, and a site refuses a secret that is not
// its API's.
func TestWebSecret(t *testing.T) {
	path, _ := writeRecords(t, "sealedbid", nil, 2)
	rs, err := OpenRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := newSite(t, Options{Records: rs, Run: NewRunFeed(t.TempDir())}, nil)
	tests := []struct {
		path, token string
		want        int
	}{
		{"/v1/site", "", 200},
		{"/v1/envs", "", 200},
		{"/v1/records", "", 401},
		{"/v1/records", "wrong-secret-0123456789", 401},
		{"/v1/records", testSecret, 200},
		{"/v1/records/0", "", 401},
		{"/v1/records/1", testSecret, 200},
		{"/v1/records/2", testSecret, 404},
		{"/v1/records/x", testSecret, 404},
		{"/v1/run", "", 401},
		{"/v1/run", testSecret, 200},
		{"/v1/run?after=x", testSecret, 400},
		{"/v1/episodes", "", 401},
		{"/v1/episodes", testSecret, 200},
	}
	for _, tt := range tests {
		resp, body := get(t, ts.URL+tt.path, tt.token)
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s with %q: got HTTP %d (%s), want %d", tt.path, tt.token, resp.StatusCode, body, tt.want)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", tt.path, resp.Header.Get("Cache-Control"))
		}
	}
	api, err := remote.NewServer(context.Background(), envs.Find, remote.ServerOptions{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{API: api, Secret: testSecret}); err == nil {
		t.Error("a site took a secret that is not its API server's")
	}
	if _, err := New(Options{Secret: "short"}); err == nil {
		t.Error("a site took a 5-byte secret")
	}
}

// TestRecords: the index of a records file gives back each record as
// written, and refuses a line that is not a record.
func TestRecords(t *testing.T) {
	path, recs := writeRecords(t, "werewolf", nil, 3)
	rs, err := OpenRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Len() != len(recs) {
		t.Fatalf("got %d records, want %d", rs.Len(), len(recs))
	}
	for i, want := range recs {
		got, err := rs.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(got)
		// As read back from JSON: data payloads are generic maps.
		var back engine.Record
		wb, _ := json.Marshal(want)
		json.Unmarshal(wb, &back)
		wb, _ = json.Marshal(&back)
		if !bytes.Equal(gb, wb) {
			t.Errorf("record %d differs from what was written", i)
		}
		if s := rs.Summaries()[i]; s.Events != len(want.Events) || s.Result != want.Outcome.Result || uint64(s.Seed) != want.Seed {
			t.Errorf("summary %d = %+v, want %d events, result %s, seed %d", i, s, len(want.Events), want.Outcome.Result, want.Seed)
		}
	}
	if _, err := rs.Record(3); err == nil {
		t.Error("record 3 of 3 was found")
	}
}

// TestRecordsSeedString: the replay page's records carry their seeds as
// exact decimal strings (the records' seeds are above 2^53, which a
// JavaScript number rounds), in the list and in each record.
func TestRecordsSeedString(t *testing.T) {
	path, recs := writeRecords(t, "sealedbid", nil, 2)
	rs, err := OpenRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := newSite(t, Options{Records: rs}, nil)
	_, b := get(t, ts.URL+"/v1/records", testSecret)
	var list struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Records) != len(recs) {
		t.Fatalf("records list %s: %v", b, err)
	}
	for i, want := range recs {
		if want.Seed < 1<<53 {
			t.Fatalf("record %d's seed %d is below 2^53: the test checks nothing", i, want.Seed)
		}
		ws := strconv.FormatUint(want.Seed, 10)
		if got := list.Records[i]["seed"]; got != ws {
			t.Errorf("summary %d's seed %#v, want the string %q", i, got, ws)
		}
		_, b := get(t, ts.URL+"/v1/records/"+strconv.Itoa(i), testSecret)
		var rec map[string]any
		if err := json.Unmarshal(b, &rec); err != nil || rec["seed"] != ws {
			t.Errorf("record %d's seed %#v (%v), want the string %q", i, rec["seed"], err, ws)
		}
	}
}

// TestRecordsBadLines: a records file with a `{}`, a `null`, garbage and
// a torn last line among its records lists every valid record, names each
// bad line, and serves both to the replay page.
func TestRecordsBadLines(t *testing.T) {
	path, recs := writeRecords(t, "sealedbid", nil, 3)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	body := "{}\n" + lines[0] + "null\n" + lines[1] + "{not json\n" + lines[2] + lines[0][:len(lines[0])/2]
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := OpenRecords(bad)
	if err != nil {
		t.Fatalf("got %v, want the valid records opened", err)
	}
	if rs.Len() != len(recs) {
		t.Fatalf("got %d records, want %d", rs.Len(), len(recs))
	}
	for i, want := range recs {
		got, err := rs.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seed != want.Seed {
			t.Errorf("record %d: got seed %d, want %d", i, got.Seed, want.Seed)
		}
	}
	want := []BadLine{
		{Line: 1, Error: "not an episode record: no env"},
		{Line: 3, Error: "not an episode record: no env"},
		{Line: 5, Error: "invalid character 'n' looking for beginning of object key string"},
		{Line: 7, Torn: true},
	}
	got := rs.Bad()
	if len(got) != len(want) {
		t.Fatalf("got bad lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Line != want[i].Line || got[i].Torn != want[i].Torn || (want[i].Error != "" && got[i].Error != want[i].Error) {
			t.Errorf("bad line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	ts, _ := newSite(t, Options{Records: rs}, nil)
	resp, body2 := get(t, ts.URL+"/v1/records", testSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/records: %d %s", resp.StatusCode, body2)
	}
	var page struct {
		Records []RecordSummary `json:"records"`
		Bad     []BadLine       `json:"bad"`
	}
	if err := json.Unmarshal(body2, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != len(recs) || len(page.Bad) != len(want) {
		t.Errorf("GET /v1/records: got %d records and %d bad lines, want %d and %d", len(page.Records), len(page.Bad), len(recs), len(want))
	}
}

// naiveTail is tailLines by splitting the whole file.
func naiveTail(b []byte, n int) [][]byte {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return nil
	}
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// FuzzTailLines: with a window that holds the whole file, tailLines is the
// naive split; with a small window it returns a suffix of it, whole lines
// only.
func FuzzTailLines(f *testing.F) {
	for _, s := range []string{"", "a\n", "a\nb\n", "a\nb", "\n\n x \n", "one\ntwo\nthree\n"} {
		f.Add([]byte(s), 2, int64(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, n int, window int64) {
		if n < 0 || n > 100 || window < 1 {
			return
		}
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := tailLines(path, n, int64(len(data))+1)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveTail(data, n); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("got %q, want %q", got, want)
		}
		part, err := tailLines(path, n, window)
		if err != nil {
			t.Fatal(err)
		}
		all := naiveTail(data, len(data)+1)
		if len(part) > len(all) {
			t.Fatalf("%d lines from a window, the file has %d", len(part), len(all))
		}
		for i, l := range part {
			if !bytes.Equal(l, all[len(all)-len(part)+i]) {
				t.Fatalf("window line %d = %q, not the file's", i, l)
			}
		}
	})
}

// TestRunFeed: the feed returns the metrics lines after the cursor as
// written (unknown fields kept), skips a line being written, gives the
// last episodes, and reports the live status a run's hooks give it.
func TestRunFeed(t *testing.T) {
	dir := t.TempDir()
	var metrics bytes.Buffer
	for it := 1; it <= 3; it++ {
		fmt.Fprintf(&metrics, `{"iteration":%d,"reward":{"buyer":0.%d},"kl":0.01,"heldout_reward":{"buyer":0.5}}`+"\n", it, it)
	}
	metrics.WriteString(`{"iteration":4,"rew`) // being written
	os.WriteFile(filepath.Join(dir, runfiles.MetricsFile), metrics.Bytes(), 0o644)
	_, recs := writeRecords(t, "sealedbid", nil, 4)
	var eps bytes.Buffer
	for _, r := range recs {
		b, _ := json.Marshal(r)
		eps.Write(append(b, '\n'))
	}
	os.WriteFile(filepath.Join(dir, runfiles.EpisodesFile), eps.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, runfiles.EvalFile), []byte(`{"iteration":0,"mean":0.4,"reward":{"buyer":0.4},"cells":[{"env":"x"}]}`+"\n"+
		`{"iteration":2,"mean":0.6,"reward":{"buyer":0.6}}`+"\n"+`{"iteration":4,"me`), 0o644)
	f := NewRunFeed(dir)
	for _, tt := range []struct{ after, episodes, wantMetrics, wantEpisodes int }{
		{-1, 3, 3, 3}, {1, 1, 2, 1}, {3, 0, 0, 0}, {0, 99, 3, 4},
	} {
		p, err := f.Page(tt.after, tt.episodes)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Metrics) != tt.wantMetrics || len(p.Episodes) != tt.wantEpisodes {
			t.Errorf("after %d, %d episodes: got %d metrics, %d episodes; want %d, %d", tt.after, tt.episodes, len(p.Metrics), len(p.Episodes), tt.wantMetrics, tt.wantEpisodes)
		}
		if want := []EvalPoint{{Iteration: 0, Mean: 0.4, Reward: map[string]float64{"buyer": 0.4}}, {Iteration: 2, Mean: 0.6, Reward: map[string]float64{"buyer": 0.6}}}; !reflect.DeepEqual(p.Evals, want) {
			t.Errorf("evaluations %+v, want %+v (the one being written left out)", p.Evals, want)
		}
		if tt.wantMetrics > 0 && !strings.Contains(string(p.Metrics[0]), "heldout_reward") {
			t.Errorf("metrics line %s lost its held-out field", p.Metrics[0])
		}
		if tt.wantEpisodes > 0 {
			var last engine.Record
			json.Unmarshal(p.Episodes[len(p.Episodes)-1], &last)
			if last.Seed != recs[len(recs)-1].Seed {
				t.Errorf("last episode has seed %d, want the file's last (%d)", last.Seed, recs[len(recs)-1].Seed)
			}
		}
	}
	f.Start(5)
	f.Phase(4, "rollout")
	f.Episode(4, 2, 8)
	status := func(want RunStatus) {
		t.Helper()
		p, _ := f.Page(3, 0)
		if p.Status.Updated.IsZero() || func() bool { p.Status.Updated = want.Updated; return p.Status != want }() {
			t.Errorf("status %+v, want %+v", p.Status, want)
		}
	}
	status(RunStatus{Live: true, Iteration: 4, Phase: "rollout", Episodes: 2, Total: 8, Iterations: 5})
	f.Iteration(&runfiles.Metrics{Iteration: 4})
	status(RunStatus{Live: true, Iteration: 4, Phase: "done", Episodes: 2, Total: 8, Iterations: 5})
}

// echoBackend is a message-level backend that answers with the first legal
// reply it finds in the prompt (else REJECT) and records the requests.
type echoBackend struct{ reqs []inference.Request }

func (b *echoBackend) Generate(_ context.Context, reqs []inference.Request) ([]inference.Response, error) {
	b.reqs = append(b.reqs, reqs...)
	out := make([]inference.Response, len(reqs))
	for i, r := range reqs {
		last := r.Messages[len(r.Messages)-1].Content
		// The prompt lists the legal replies when there are at most 30;
		// REJECT is always one of them in a structured negotiation.
		text := "REJECT"
		if _, legal, ok := strings.Cut(last, "Legal replies: "); ok {
			text = strings.Split(legal, " | ")[0]
		}
		out[i] = inference.Response{Text: text}
	}
	return out, nil
}

func (*echoBackend) Close() error { return nil }

// TestModelAgents: names are checked, the first player is also "model",
// and a message-level player plays a whole episode through the API with
// its conversation growing by the seat's view only.
func TestModelAgents(t *testing.T) {
	b := &echoBackend{}
	p := &selfplay.Player{Label: "echo", Backend: b}
	for _, tt := range []struct {
		names []string
		ok    bool
	}{{[]string{"a"}, true}, {[]string{"remote"}, false}, {[]string{"scripted:x"}, false}, {[]string{""}, false}, {[]string{"a", "a"}, false}} {
		players := make([]*selfplay.Player, len(tt.names))
		for i := range players {
			players[i] = p
		}
		if _, err := NewModelAgents(tt.names, players, SeatOptions{}.Defaults()); (err == nil) != tt.ok {
			t.Errorf("names %q: err %v, want ok %v", tt.names, err, tt.ok)
		}
	}
	ag, err := NewModelAgents([]string{"ollama:echo"}, []*selfplay.Player{p}, SeatOptions{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ag.Names(), []string{"model", "ollama:echo"}; !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	ts, _ := newSite(t, Options{}, ag)
	c := &remote.Client{BaseURL: ts.URL, Secret: testSecret}
	ctx := context.Background()
	seed := uint64(5)
	info, err := c.Create(ctx, remote.CreateRequest{Env: "dealornodeal", Seed: &seed, Params: engine.Params{"structured_only": true}, Agents: []string{"model", "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.Events(ctx, info.ID, -1, testSecret, 0, 30)
	for err == nil && !page.Done {
		var more remote.EventsPage
		more, err = c.Events(ctx, info.ID, -1, testSecret, page.Next, 30)
		more.Events = append(page.Events, more.Events...)
		page = more
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b.reqs) == 0 {
		t.Fatal("the model seat was never asked")
	}
	acks := 0
	for _, e := range page.Events {
		if e.Seat == 0 && e.Kind == engine.KindAck {
			acks++
		}
		if e.Kind == engine.KindBriefing && !e.Audience.Includes(0) {
			for _, r := range b.reqs {
				for _, m := range r.Messages {
					if strings.Contains(m.Content, e.Text) {
						t.Fatalf("seat 1's briefing reached the model of seat 0")
					}
				}
			}
		}
	}
	if acks != len(b.reqs) {
		t.Errorf("%d acks for %d requests: the echoed legal replies should all be taken", acks, len(b.reqs))
	}
	for i := 1; i < len(b.reqs); i++ {
		if len(b.reqs[i].Messages) <= len(b.reqs[i-1].Messages) {
			t.Errorf("request %d has %d messages, after %d: the conversation should grow", i, len(b.reqs[i].Messages), len(b.reqs[i-1].Messages))
		}
	}
	if b.reqs[0].Sampling.Seed == b.reqs[len(b.reqs)-1].Sampling.Seed && len(b.reqs) > 1 {
		t.Error("every turn sampled with one seed")
	}
}

// TestRunFeedBadLinesAndCursor: a garbage line in metrics.jsonl is named
// and left out while the other lines still chart, and a finished run
// reports its last iteration when the cursor is past every line (the
// dashboard's refresh after its first page).
func TestRunFeedBadLinesAndCursor(t *testing.T) {
	dir := t.TempDir()
	lines := `{"iteration":1,"reward_mean":0.1}` + "\n" + `not json` + "\n" + `null` + "\n" + `{}` + "\n" + `{"iteration":2,"reward_mean":0.2}` + "\n"
	os.WriteFile(filepath.Join(dir, runfiles.MetricsFile), []byte(lines), 0o644)
	f := NewRunFeed(dir)
	p, err := f.Page(0, 0)
	if err != nil {
		t.Fatalf("one bad line failed the page: %v", err)
	}
	if len(p.Metrics) != 2 || len(p.Bad) != 3 || !strings.HasPrefix(p.Bad[0], runfiles.MetricsFile+":2:") {
		t.Errorf("got %d metrics lines and bad %q; want 2 and lines 2, 3 and 4 named", len(p.Metrics), p.Bad)
	}
	if p, _ := f.Page(2, 0); len(p.Metrics) != 0 || p.Status.Iteration != 2 {
		t.Errorf("after the last line: %d metrics, iteration %d; want 0 and 2", len(p.Metrics), p.Status.Iteration)
	}
}

// TestEvalInterval: a held-out line's pairings make the interval of its
// mean (independent pairings: the half-widths add in quadrature, over
// their number); a line without pairings has none.
func TestEvalInterval(t *testing.T) {
	var e EvalPoint
	line := []byte(`{"iteration":1,"mean":0.5,"cells":[{"reward":{"mean":0.4,"lo":0.3,"hi":0.5}},{"reward":{"mean":0.6,"lo":0.5,"hi":0.7}}]}`)
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	e.interval(line)
	half := math.Sqrt(0.1*0.1+0.1*0.1) / 2
	if e.Lo == nil || e.Hi == nil || math.Abs(*e.Lo-(0.5-half)) > 1e-12 || math.Abs(*e.Hi-(0.5+half)) > 1e-12 {
		t.Errorf("interval %v..%v, want 0.5 ± %v", e.Lo, e.Hi, half)
	}
	var none EvalPoint
	none.interval([]byte(`{"iteration":1,"mean":0.5,"cells":[]}`))
	if none.Lo != nil || none.Hi != nil {
		t.Error("a line without pairings got an interval")
	}
}
