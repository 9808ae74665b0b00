package web

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/werewolf"
)

var screenshots = flag.Bool("screenshots", false, "write each page's screenshot into ../docs/ui/ (shown by docs/ui.md)")

// requireBrowserEnv, when set (make test sets it), turns a missing browser
// into a failure: the install script puts Chromium there.
const requireBrowserEnv = "OMAR_REQUIRE_BROWSER"

func browserPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile and no
// network beyond the test server. Uncaught exceptions of the page fail
// the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := browserPath()
	if path == "" {
		if os.Getenv(requireBrowserEnv) != "" {
			t.Fatalf("no Chromium on PATH, and $%s is set (make deps installs it with apt-get install chromium)", requireBrowserEnv)
		}
		t.Skip("no Chromium on PATH: the browser tests need one (apt-get install chromium; make test installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException {
				t.Errorf("the page threw: %s", m.Text)
			}
		}
	}()
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc(); <-done })
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// waitJS waits until the JavaScript expression is true; it keeps asking
// across a navigation (a page that moves to another destroys the
// evaluation context under a pending poll).
func waitJS(t *testing.T, ctx context.Context, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting %v for %s (last error %v)", timeout, expr, lastErr)
}

// shot writes the viewport as ../docs/ui/NAME.png when -screenshots is
// given.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	writeShot(t, ctx, name, chromedp.CaptureScreenshot())
}

// shotPage writes the whole page, below the viewport too.
func shotPage(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	writeShot(t, ctx, name, chromedp.FullScreenshot(100))
}

func writeShot(t *testing.T, ctx context.Context, name string, capture chromedp.Action[[]byte]) {
	t.Helper()
	if !*screenshots {
		return
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "docs", "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pageSeqs are the sequence numbers of the events the page shows.
func pageSeqs(t *testing.T, ctx context.Context) []int64 {
	return eval[[]int64](t, ctx, `[...document.querySelectorAll("#events li.event")].map((e) => Number(e.dataset.seq))`)
}

func seqsOf(evs []engine.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// allEvents reads a seat's view (-1: the omniscient log) to the end.
func allEvents(t *testing.T, c *remote.Client, id string, seat int) []engine.Event {
	t.Helper()
	var out []engine.Event
	var after int64
	for {
		page, err := c.Events(context.Background(), id, seat, c.Secret, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Events...)
		after = page.Next
		if page.Done {
			return out
		}
	}
}

// playSeat answers the seat page's questions until the episode ends: a
// legal button when the question has them, else reply(k) as free text.
// It returns the texts sent.
func playSeat(t *testing.T, ctx context.Context, reply func(k int) string, onTurn func(k int)) []string {
	t.Helper()
	var sent []string
	last := ""
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		state := eval[string](t, ctx, `document.body.dataset.done === "true" ? "done" : (() => { const t = document.getElementById("turn"); return t.classList.contains("hidden") ? "" : t.dataset.notification; })()`)
		switch {
		case state == "done":
			return sent
		case state == "" || state == last:
			time.Sleep(30 * time.Millisecond)
			continue
		}
		last = state
		if onTurn != nil {
			onTurn(len(sent))
		}
		if eval[int](t, ctx, `document.querySelectorAll("#legal button").length`) > 0 {
			sent = append(sent, eval[string](t, ctx, `document.querySelector("#legal button").dataset.action`))
			do(t, ctx, chromedp.Click("#legal button"))
		} else {
			text := reply(len(sent))
			sent = append(sent, text)
			if eval[bool](t, ctx, `!document.getElementById("move-form").classList.contains("hidden")`) {
				do(t, ctx, chromedp.Click("#raw-toggle")) // the whole reply as text, past the move controls
			}
			do(t, ctx, chromedp.SendKeys("#reply", text), chromedp.Click("#send"))
		}
		waitJS(t, ctx, `document.body.dataset.done === "true" || document.getElementById("act-result").textContent !== ""`, 30*time.Second)
	}
	t.Fatal("the episode did not end within 3 minutes")
	return nil
}

// TestUICraigslistAgainstModel: a person creates a Craigslist episode on
// the episodes page, plays the buyer against the model (a tiny llama) with
// free-text moves through the seat page to the outcome, and the page
// showed exactly seat 0's view.
func TestUICraigslistAgainstModel(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("no llama.cpp libraries in lib/llama/cpu (make llama installs them)")
	}
	ctx := newBrowser(t)
	mpath := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := model.WriteFile(mpath, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	api := remote.ServerOptions{}.Defaults()
	api.Secret, api.Catalog = testSecret, envs.All()
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site, closer, err := Serve(sctx, ServeOptions{API: api, Find: envs.Find, Players: []players.Spec{{Kind: players.KindBase}}, Model: mpath,
		Backend: players.Backend{LlamaLib: lib, Threads: 2}, Slots: 2, Context: 2048, Seat: SeatOptions{}.Defaults()})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ts := httptest.NewServer(site)
	defer ts.Close()

	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/#secret="+testSecret))
	waitJS(t, ctx, `document.querySelectorAll("select.agent").length === 2 && document.getElementById("env").value.startsWith("craigslist")`, 20*time.Second)
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll("select.agent")].map((s) => s.value)`); !slices.Equal(got, []string{"me", "model"}) {
		t.Fatalf("default agents %v, want me (the buyer) and model", got)
	}
	if h := eval[string](t, ctx, `location.hash`); h != "" {
		t.Errorf("the secret stayed in the address bar: %q", h)
	}
	do(t, ctx, chromedp.Click("#create-button"))
	waitJS(t, ctx, `location.pathname === "/ui/episode" && document.getElementById("seats").children.length === 2`, 20*time.Second)
	id := eval[string](t, ctx, `new URLSearchParams(location.search).get("id")`)

	sent := playSeat(t, ctx, func(k int) string { return fmt.Sprintf("PROPOSE: price=%d", 40+15*k) }, func(k int) {
		if k == 1 {
			shot(t, ctx, "seat")
		}
	})
	waitJS(t, ctx, `!document.getElementById("outcome").classList.contains("hidden")`, 10*time.Second)
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll("#outcome-rewards tr")].map((r) => r.children[0].textContent)`); !slices.Equal(got, []string{"Buyer (you)", "Seller"}) {
		t.Errorf("the outcome's rewards are by %q, want the buyer's and the seller's", got)
	}
	c := &remote.Client{BaseURL: ts.URL, Secret: testSecret}
	info, err := c.Episode(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != "done" || info.Seats[0].Agent != "me" || info.Seats[1].Agent != "base" {
		t.Fatalf("episode %+v, want done with the buyer played by me and the base model as seller", info)
	}
	var buyer []string
	model := 0
	for _, e := range allEvents(t, c, id, -1) {
		if e.Kind == engine.KindAction && e.Seat == 0 {
			buyer = append(buyer, e.Text)
		}
		if e.Kind == engine.KindAction && e.Seat == 1 {
			model++
		}
	}
	if len(sent) == 0 || !slices.Equal(buyer, sent) {
		t.Errorf("the record's buyer actions %q, want the page's %q", buyer, sent)
	}
	if model == 0 {
		t.Error("the model never moved")
	}
	if got, want := pageSeqs(t, ctx), seqsOf(allEvents(t, c, id, 0)); !slices.Equal(got, want) {
		t.Errorf("the buyer's page shows events %v, want the buyer's view %v", got, want)
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/"))
	waitJS(t, ctx, `document.querySelector("#episodes tr[data-id]") !== null`, 10*time.Second)
	shot(t, ctx, "episodes")
}

// TestUISeatSeesOnlyItsView plays a 7-player Werewolf game with one seat
// played in the browser and checks, for that villager's page and for a
// werewolf's, that the page shows exactly the seat's view: no event of
// another seat's or team's audience, no other seat's briefing text; the
// creator's page shows the whole log.
func TestUISeatSeesOnlyItsView(t *testing.T) {
	ctx := newBrowser(t)
	ts, _ := newSite(t, Options{}, nil)
	params := engine.Params{"players": 7}
	seed := uint64(21)
	ep, err := werewolf.New().NewEpisode(seed, params)
	if err != nil {
		t.Fatal(err)
	}
	villager, wolf := -1, -1
	for _, s := range ep.Seats() {
		switch {
		case s.Team == "werewolves" && wolf < 0:
			wolf = s.Index
		case s.Role == "villager" && villager < 0:
			villager = s.Index
		}
	}
	if villager < 0 || wolf < 0 {
		t.Fatalf("seed %d dealt no villager or no werewolf: %+v", seed, ep.Seats())
	}
	agents := make([]string, 7)
	for i := range agents {
		agents[i] = "scripted"
	}
	agents[villager] = "remote"
	c := &remote.Client{BaseURL: ts.URL, Secret: testSecret}
	info, err := c.Create(context.Background(), remote.CreateRequest{Env: "werewolf", Seed: &seed, Params: params, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	seatPage := func(seat int) string {
		return ts.URL + "/ui/episode?id=" + info.ID + "#seat=" + fmt.Sprint(seat) + "&token=" + info.Seats[seat].Token
	}
	do(t, ctx, chromedp.Navigate(seatPage(villager)))
	playSeat(t, ctx, func(k int) string { return fmt.Sprintf("I am a simple villager; round %d.", k) }, func(k int) {
		if k == 3 {
			shot(t, ctx, "werewolf-seat")
		}
	})
	all := allEvents(t, c, info.ID, -1)
	check := func(seat int) {
		t.Helper()
		got := pageSeqs(t, ctx)
		if want := seqsOf(allEvents(t, c, info.ID, seat)); !slices.Equal(got, want) {
			t.Errorf("seat %d's page shows events %v, want its view %v", seat, got, want)
		}
		body := eval[string](t, ctx, `document.body.innerText`)
		hidden := 0
		for _, e := range all {
			if e.Audience.Includes(seat) {
				continue
			}
			hidden++
			if slices.Contains(got, e.Seq) {
				t.Errorf("seat %d's page shows event %d (%s to %+v)", seat, e.Seq, e.Kind, e.Audience)
			}
			if e.Kind == engine.KindBriefing && strings.Contains(body, e.Text) {
				t.Errorf("seat %d's page shows seat %d's briefing", seat, e.Seat)
			}
		}
		if hidden == 0 {
			t.Fatalf("seat %d may see every event: the game has nothing private to check", seat)
		}
		if eval[bool](t, ctx, `!document.getElementById("view-box").classList.contains("hidden")`) {
			t.Errorf("seat %d's page offers other views", seat)
		}
	}
	check(villager)
	// Through a blank page: a URL that differs only in its fragment would
	// not load the page again before the checks run.
	do(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(seatPage(wolf)))
	waitJS(t, ctx, `document.body.dataset.done === "true"`, 20*time.Second)
	check(wolf)
	// The creator (with the secret) sees everything.
	do(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(ts.URL+"/ui/episode?id="+info.ID+"#secret="+testSecret))
	waitJS(t, ctx, `document.body.dataset.done === "true"`, 20*time.Second)
	if got, want := pageSeqs(t, ctx), seqsOf(all); !slices.Equal(got, want) {
		t.Errorf("the creator's page shows %d events, want the whole log's %d", len(got), len(want))
	}
	shot(t, ctx, "werewolf-creator")
}

// TestUIReplayWerewolf replays a recorded Werewolf game from the server's
// records file step by step, and as one seat sees it.
func TestUIReplayWerewolf(t *testing.T) {
	ctx := newBrowser(t)
	path, recs := writeRecords(t, "werewolf", engine.Params{"players": 7}, 2)
	rs, err := OpenRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := newSite(t, Options{Records: rs}, nil)
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/replay#secret="+testSecret))
	waitJS(t, ctx, `document.querySelectorAll("#records tr").length === 2`, 20*time.Second)
	do(t, ctx, chromedp.Click(`#records tr[data-index="1"] a.open-record`))
	waitJS(t, ctx, `document.getElementById("position").dataset.total !== undefined`, 10*time.Second)
	rec := recs[1]
	if got := eval[int](t, ctx, `Number(document.getElementById("position").dataset.total)`); got != len(rec.Events) {
		t.Fatalf("the replay has %d steps, want the record's %d events", got, len(rec.Events))
	}
	for k := 1; k <= 5; k++ {
		do(t, ctx, chromedp.Click("#next"))
		if got := eval[int](t, ctx, `document.querySelectorAll("#events li").length`); got != k {
			t.Fatalf("after %d steps the page shows %d events", k, got)
		}
	}
	do(t, ctx, chromedp.Click("#prev"))
	if got := eval[int](t, ctx, `document.querySelectorAll("#events li").length`); got != 4 {
		t.Errorf("a step back shows %d events, want 4", got)
	}
	shot(t, ctx, "replay")
	do(t, ctx, chromedp.Click("#last"))
	if got, want := pageSeqs(t, ctx), seqsOf(rec.Events); !slices.Equal(got, want) {
		t.Errorf("the whole replay shows %v, want %v", got, want)
	}
	last := eval[string](t, ctx, `document.querySelector("#events li:last-child").dataset.kind`)
	if last != string(engine.KindOutcome) {
		t.Errorf("the replay ends with a %s event, want the outcome", last)
	}
	seat := 3
	do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const v = document.getElementById("view"); v.value = "%d"; v.dispatchEvent(new Event("change")); })()`, seat)))
	var want []int64
	for _, e := range rec.Events {
		if e.Audience.Includes(seat) {
			want = append(want, e.Seq)
		}
	}
	if got := pageSeqs(t, ctx); !slices.Equal(got, want) {
		t.Errorf("as seat %d the replay shows %v, want %v", seat, got, want)
	}
	roles := eval[[]string](t, ctx, `[...document.querySelectorAll("#seats tr")].map((r) => r.children[1].textContent)`)
	for i, r := range roles {
		if i != seat && r != "hidden" {
			t.Errorf("as seat %d the replay shows seat %d's role %q", seat, i, r)
		}
	}
}

// TestUIDashboard: the dashboard charts a run directory's metrics and
// draws the new iterations as they are appended, and shows the latest
// episodes as transcripts.
func TestUIDashboard(t *testing.T) {
	ctx := newBrowser(t)
	dir := t.TempDir()
	line := func(it int) string {
		m := map[string]any{"iteration": it, "reward": map[string]float64{"buyer": 0.1 * float64(it), "seller": 0.5 - 0.05*float64(it)},
			"reward_mean": 0.3, "kl": 0.01 * float64(it), "kl_ref": 0.02 * float64(it), "entropy": 2.0 - 0.1*float64(it),
			"policy_loss": 0.2 - 0.03*float64(it), "value_loss": 0.5 / float64(it), "clip_frac": 0.05 * float64(it), "grad_norm": 1.5 + 0.2*float64(it),
			"invalid_rate": 0.1 / float64(it), "default_rate": 0,
			"tokens_per_s": map[string]float64{"rollout": 900 + 10*float64(it), "update": 400}}
		if it%2 == 0 {
			m["heldout_reward"] = map[string]float64{"buyer": 0.05 * float64(it)}
		}
		b, _ := json.Marshal(m)
		return string(b) + "\n"
	}
	metrics := filepath.Join(dir, "metrics.jsonl")
	os.WriteFile(metrics, []byte(line(1)+line(2)+line(3)), 0o644)
	_, recs := writeRecords(t, "craigslist", nil, 3)
	f, _ := os.Create(filepath.Join(dir, "episodes.jsonl"))
	for _, r := range recs {
		b, _ := json.Marshal(r)
		f.Write(append(b, '\n'))
	}
	f.Close()
	ts, _ := newSite(t, Options{Run: NewRunFeed(dir)}, nil)
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/dashboard#secret="+testSecret))
	waitJS(t, ctx, `document.getElementById("status").dataset.iterations === "3"`, 20*time.Second)
	points := func(id string) int {
		return eval[int](t, ctx, fmt.Sprintf(`Number(document.getElementById("chart-%s").dataset.points)`, id))
	}
	for id, want := range map[string]int{"reward": 9, "eval": 1, "kl": 6, "entropy": 3, "tps": 6, "loss": 6, "clip": 3, "grad": 3, "rates": 6} {
		if got := points(id); got != want {
			t.Errorf("chart %s has %d points, want %d", id, got, want)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#episodes details").length`); n != 3 {
		t.Errorf("%d transcripts, want 3", n)
	}
	fa, _ := os.OpenFile(metrics, os.O_APPEND|os.O_WRONLY, 0)
	fa.WriteString(line(4))
	fa.Close()
	waitJS(t, ctx, `document.getElementById("status").dataset.iterations === "4"`, 20*time.Second)
	if got := points("eval"); got != 2 {
		t.Errorf("after iteration 4 the evaluation chart has %d points, want 2", got)
	}
	// With eval.jsonl the chart draws its evaluations, the one before the
	// first iteration included: mean and two sides at iterations 0 and 4.
	// The pairings' intervals make the mean's band.
	cells := `[{"reward":{"mean":0.3,"lo":0.2,"hi":0.4,"n":20}},{"reward":{"mean":0.5,"lo":0.4,"hi":0.6,"n":20}}]`
	evals := `{"iteration":0,"mean":0.4,"reward":{"buyer":0.3,"seller":0.5},"cells":` + cells + `}` + "\n" +
		`{"iteration":4,"mean":0.5,"reward":{"buyer":0.45,"seller":0.55},"cells":` + cells + `}` + "\n"
	os.WriteFile(filepath.Join(dir, "eval.jsonl"), []byte(evals), 0o644)
	waitJS(t, ctx, `document.getElementById("chart-eval").dataset.points === "6"`, 20*time.Second)
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll("#chart-eval svg text.xtick")].map((t) => t.textContent)`); len(got) < 3 || got[0] != "0" || got[len(got)-1] != "4" {
		t.Errorf("the evaluation chart's x ticks %v, want 0 … 4", got)
	}
	if got := eval[string](t, ctx, `document.getElementById("chart-eval").dataset.bands`); got != "2" {
		t.Errorf("the evaluation chart has %s interval points, want 2 (the mean's, at 0 and 4)", got)
	}
	// Every chart labels its axes with ticks, and a series keeps its
	// colour from chart to chart.
	for _, id := range []string{"reward", "eval", "loss", "kl", "entropy", "clip", "grad", "tps"} {
		n := eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll("#chart-%s svg text.ytick").length`, id))
		labels := eval[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll("#chart-%s svg text.xlabel, #chart-%s svg text.ylabel")].map((t) => t.textContent)`, id, id))
		if n < 3 || len(labels) != 2 || labels[0] != "iteration" || labels[1] == "" {
			t.Errorf("chart %s: %d y ticks and axis labels %q, want 3 or more and both axes named", id, n, labels)
		}
	}
	swatch := func(chart, series string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector('#chart-%s .legend span[data-series="%s"] i').style.background`, chart, series))
	}
	if a, b := swatch("reward", "buyer"), swatch("eval", "buyer"); a == "" || a != b {
		t.Errorf("the buyer is %q on the reward chart and %q on the held-out chart, want one colour", a, b)
	}
	if a, b := swatch("reward", "buyer"), swatch("reward", "seller"); a == b {
		t.Errorf("buyer and seller share the colour %q", a)
	}
	// The charts, with the transcripts folded: they would make the picture a page long.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("#episodes details").forEach((d) => (d.open = false))`))
	shotPage(t, ctx, "dashboard")
	// A finished run read again shows its last iteration.
	do(t, ctx, chromedp.Reload())
	waitJS(t, ctx, `document.getElementById("status").dataset.iterations === "4"`, 20*time.Second)
	if got := eval[string](t, ctx, `document.getElementById("status").textContent`); !strings.Contains(got, "iteration 4") {
		t.Errorf("after a reload the status reads %q, want iteration 4", got)
	}
}

// TestUIDashboardLive trains the built-in tiny run for two iterations with
// the dashboard's feed chained onto its hooks, as omar selfplay --ui does:
// the page follows the run's hooks live, draws both iterations without a
// reload, and the hooks that were set before still run.
func TestUIDashboardLive(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("no llama.cpp libraries in lib/llama/cpu (make llama installs them)")
	}
	ctx := newBrowser(t)
	o := loop.Options{}.Defaults()
	o.Iterations, o.Rollout.Episodes, o.Rollout.LlamaLib = 2, 4, lib
	run, err := loop.Open(filepath.Join(t.TempDir(), "run"), o, loop.Fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	var iterations []int
	run.Hooks.Iteration = func(m *runfiles.Metrics) { iterations = append(iterations, m.Iteration) }
	feed := NewRunFeed(run.Path(""))
	feed.Start(o.Iterations)
	run.Hooks.Chain(loop.Hooks{
		Phase:     feed.Phase,
		Episode:   feed.Episode,
		Iteration: feed.Iteration,
	})
	d, err := ServeDashboard(feed, "127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !strings.Contains(d.URL, "/ui/dashboard#secret=") {
		t.Fatalf("dashboard link %q carries no secret", d.URL)
	}
	do(t, ctx, chromedp.Navigate(d.URL))
	waitJS(t, ctx, `document.getElementById("status").textContent.startsWith("live")`, 20*time.Second)
	trained := make(chan error, 1)
	go func() { trained <- run.Train(context.Background()) }()
	waitJS(t, ctx, `document.getElementById("status").dataset.iterations === "2"`, 3*time.Minute)
	if err := <-trained; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(iterations, []int{1, 2}) {
		t.Errorf("the hook set before the dashboard saw iterations %v, want [1 2]", iterations)
	}
	if got := eval[int](t, ctx, `Number(document.getElementById("chart-reward").dataset.points)`); got < 2 {
		t.Errorf("the reward chart has %d points after two iterations", got)
	}
	waitJS(t, ctx, `document.querySelectorAll("#episodes details").length === 3`, 10*time.Second)
}

// TestUIReplayBadLines: a records file with a `{}`, a `null` and a torn
// last line among its records lists every valid record and names each
// bad line — served by the server, and opened locally in the page (which
// must not throw).
func TestUIReplayBadLines(t *testing.T) {
	ctx := newBrowser(t)
	path, recs := writeRecords(t, "sealedbid", nil, 2)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	body := "{}\n" + lines[0] + "null\n" + lines[1] + lines[0][:len(lines[0])/2]
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := OpenRecords(bad)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := newSite(t, Options{Records: rs}, nil)
	wantBad := []string{"bad.jsonl:1: not an episode record: no env", "bad.jsonl:3: not an episode record: no env", "bad.jsonl:5: a torn last line"}
	checkPage := func(where string) {
		t.Helper()
		waitJS(t, ctx, fmt.Sprintf(`document.querySelectorAll("#records tr").length === %d`, len(recs)), 20*time.Second)
		got := eval[[]string](t, ctx, `[...document.querySelectorAll("#bad li")].map((l) => l.textContent)`)
		if len(got) != len(wantBad) {
			t.Fatalf("%s: the page names bad lines %q, want %d of them", where, got, len(wantBad))
		}
		for i, w := range wantBad {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: bad line %d: got %q, want it to start %q", where, i, got[i], w)
			}
		}
		do(t, ctx, chromedp.Click(`#records tr[data-index="1"] a.open-record`))
		waitJS(t, ctx, fmt.Sprintf(`Number(document.getElementById("position").dataset.total) === %d`, len(recs[1].Events)), 10*time.Second)
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/replay#secret="+testSecret))
	checkPage("served")
	// The same file opened in the browser, without the secret.
	do(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(ts.URL+"/ui/replay"))
	js, _ := json.Marshal(body)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const dt = new DataTransfer(); dt.items.add(new File([%s], "bad.jsonl")); const f = document.getElementById("file"); f.files = dt.files; f.dispatchEvent(new Event("change")); })()`, js)))
	checkPage("opened locally")
}

// TestUIDashboardBadLines: a null and a {} line among a run's metrics and
// its last episode records are skipped and counted; the charts and the
// valid transcripts still show (before, the page threw and drew nothing).
func TestUIDashboardBadLines(t *testing.T) {
	ctx := newBrowser(t)
	dir := t.TempDir()
	line := func(it int) string {
		b, _ := json.Marshal(map[string]any{"iteration": it, "reward": map[string]float64{"buyer": 0.1 * float64(it)}, "reward_mean": 0.3})
		return string(b) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(line(1)+"null\n{}\n"+line(2)+line(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, recs := writeRecords(t, "craigslist", nil, 1)
	b, _ := json.Marshal(recs[0])
	if err := os.WriteFile(filepath.Join(dir, "episodes.jsonl"), append(b, []byte("\n{}\nnull\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, _ := newSite(t, Options{Run: NewRunFeed(dir)}, nil)
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/dashboard#secret="+testSecret))
	waitJS(t, ctx, `document.getElementById("status").dataset.iterations === "3"`, 20*time.Second)
	if got := eval[int](t, ctx, `Number(document.getElementById("chart-reward").dataset.points)`); got != 6 {
		t.Errorf("the reward chart has %d points, want 6 (2 series × 3 iterations)", got)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll("#episodes details").length`); got != 1 {
		t.Errorf("the page shows %d transcripts, want the 1 valid record", got)
	}
	if got := eval[string](t, ctx, `document.getElementById("status").dataset.skipped`); got != "4" {
		t.Errorf("skipped lines: got %q, want 4", got)
	}
}
