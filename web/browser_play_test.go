package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
)

// bigSeed is above 2^53: a JavaScript number would round it to
// 18446744073709552000 and deal another episode.
const bigSeed = "18446744073709551315"

// setSelect sets a select (or input) to value as a person would, firing
// its change event.
func setSelect(t *testing.T, ctx context.Context, selector, value string) {
	t.Helper()
	js, _ := json.Marshal(value)
	sel, _ := json.Marshal(selector)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector(%s); s.value = %s; s.dispatchEvent(new Event("change")); })()`, sel, js)))
}

// TestUISeedExact: a seed above 2^53 typed into the episodes page deals
// exactly that seed, the episode page shows it exactly, and the replay of
// an older records file (numeric seeds) opened in the browser lists the
// exact seed.
func TestUISeedExact(t *testing.T) {
	ctx := newBrowser(t)
	path, recs := writeRecords(t, "sealedbid", nil, 1)
	ts, _ := newSite(t, Options{}, nil)
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/#secret="+testSecret))
	waitJS(t, ctx, `document.querySelectorAll("select.agent").length > 0`, 20*time.Second)
	setSelect(t, ctx, "#env", "sealedbid_v1")
	waitJS(t, ctx, `document.getElementById("env-desc").textContent.toLowerCase().includes("bid")`, 5*time.Second)
	for i := range eval[int](t, ctx, `document.querySelectorAll("select.agent").length`) {
		setSelect(t, ctx, fmt.Sprintf(`select.agent[data-seat="%d"]`, i), "scripted")
	}
	do(t, ctx, chromedp.SendKeys("#seed", bigSeed), chromedp.Click("#create-button"))
	waitJS(t, ctx, `location.pathname === "/ui/episode" && document.getElementById("title").textContent.includes("seed")`, 20*time.Second)
	if title := eval[string](t, ctx, `document.getElementById("title").textContent`); !strings.HasSuffix(title, "seed "+bigSeed) {
		t.Errorf("the episode page's title %q, want it to end with seed %s", title, bigSeed)
	}
	id := eval[string](t, ctx, `new URLSearchParams(location.search).get("id")`)
	c := &remote.Client{BaseURL: ts.URL, Secret: testSecret}
	info, err := c.Episode(context.Background(), id)
	if err != nil || info.Seed == nil || fmt.Sprint(*info.Seed) != bigSeed {
		t.Fatalf("the episode was dealt seed %v (%v), want %s", info.Seed, err, bigSeed)
	}

	// An older records file: its seeds are JSON numbers.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(recs[0].Seed)
	old := strings.Replace(string(b), `"seed":"`+want+`"`, `"seed":`+want, 1)
	if old == string(b) {
		t.Fatalf("the record holds no string seed %s: %.200s", want, b)
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/replay"))
	js, _ := json.Marshal(old)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const dt = new DataTransfer(); dt.items.add(new File([%s], "old.jsonl")); const f = document.getElementById("file"); f.files = dt.files; f.dispatchEvent(new Event("change")); })()`, js)))
	waitJS(t, ctx, `document.querySelectorAll("#records tr").length === 1`, 10*time.Second)
	if got := eval[string](t, ctx, `document.querySelector("#records tr").children[2].textContent`); got != want {
		t.Errorf("the replay lists seed %s, want %s", got, want)
	}
}

// TestUIGameParams: the episodes page's form offers the game's parameters
// (booleans as checkboxes, numbers as number boxes), started from the
// served model's where the server has them; the episode is created with
// them; a parameter that changes the seats redraws them, and one the game
// refuses is named before Start.
func TestUIGameParams(t *testing.T) {
	ctx := newBrowser(t)
	builtin := engine.Params{"structured_only": true, "rounds": 4, "compact": true, "hints": true}
	ts, _ := newSite(t, Options{ModelParams: map[string]engine.Params{"craigslist": builtin}}, nil)
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/#secret="+testSecret))
	waitJS(t, ctx, `document.getElementById("env").value.startsWith("craigslist") && document.querySelector("input.param") !== null`, 20*time.Second)
	type control struct {
		Type, Value string
		Checked     bool
	}
	got := eval[map[string]control](t, ctx, `Object.fromEntries([...document.querySelectorAll("input.param")].map((i) => [i.dataset.param, { type: i.type, value: i.value, checked: i.checked }]))`)
	for k, want := range map[string]control{"structured_only": {"checkbox", "on", true}, "compact": {"checkbox", "on", true}, "hints": {"checkbox", "on", true},
		"rounds": {"number", "4", false}, "scenario": {"number", "-1", false}, "scenario_set": {"text", "sampled", false}} {
		if got[k] != want {
			t.Errorf("parameter %s: control %+v, want %+v", k, got[k], want)
		}
	}
	shot(t, ctx, "new-episode")
	for i := range 2 {
		setSelect(t, ctx, fmt.Sprintf(`select.agent[data-seat="%d"]`, i), "scripted")
	}
	do(t, ctx, chromedp.Click("#create-button"))
	waitJS(t, ctx, `location.pathname === "/ui/episode" && document.getElementById("params").textContent !== ""`, 20*time.Second)
	id := eval[string](t, ctx, `new URLSearchParams(location.search).get("id")`)
	info, err := (&remote.Client{BaseURL: ts.URL, Secret: testSecret}).Episode(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if b, w := fmt.Sprint(info.Params), fmt.Sprint(map[string]any{"compact": true, "hints": true, "rounds": 4, "structured_only": true}); b != w {
		t.Errorf("the episode was created with %s, want the model's %s", b, w)
	}
	if txt := eval[string](t, ctx, `document.getElementById("params").textContent`); !strings.Contains(txt, "structured_only=true") {
		t.Errorf("the episode page shows %q, want its parameters", txt)
	}

	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/"))
	waitJS(t, ctx, `document.querySelector("input.param") !== null`, 20*time.Second)
	setSelect(t, ctx, "#env", "sealedbid_v1")
	waitJS(t, ctx, `document.getElementById("param-bidders") !== null && document.querySelectorAll("select.agent").length === 3`, 10*time.Second)
	if v := eval[string](t, ctx, `document.getElementById("param-bidders").value`); v != "3" {
		t.Errorf("bidders starts at %q, want the game's 3", v)
	}
	setSelect(t, ctx, "#param-bidders", "5")
	waitJS(t, ctx, `document.querySelectorAll("select.agent").length === 5`, 10*time.Second)
	setSelect(t, ctx, "#param-bidders", "1")
	waitJS(t, ctx, `document.getElementById("params-error").textContent.includes("bidders")`, 10*time.Second)
}

// proposeTurn answers the seat page's move controls: PROPOSE with the
// field values (a number box takes text, a select its value) and a SAY
// line; it returns the reply the page composed.
func proposeTurn(t *testing.T, ctx context.Context, say string, terms map[string]string) string {
	t.Helper()
	do(t, ctx, chromedp.Click(`#move-choices input[data-move="PROPOSE"]`))
	for f, v := range terms {
		setSelect(t, ctx, fmt.Sprintf(`#terms [data-field=%q]`, f), v)
	}
	if say != "" {
		do(t, ctx, chromedp.SendKeys("#say", say))
	}
	sent := eval[string](t, ctx, `document.getElementById("move-preview").textContent`)
	do(t, ctx, chromedp.Click("#send-move"))
	return sent
}

// TestUINegotiationControls: a person plays Craigslist's buyer on the
// page with the move controls (move, price, a message beside), against
// the scripted seller, with the server saving its episodes (--save): the
// record's buyer moves are the page's; the conversation shows both sides
// as bubbles with the protocol log one click away; the seat chosen as me
// reads me; the outcome shows the terms and each side's reward; the
// record downloads as JSON and joins the replay list. Deal or No Deal's
// item counts are selects of the counts its grammar allows.
func TestUINegotiationControls(t *testing.T) {
	ctx := newBrowser(t)
	records := filepath.Join(t.TempDir(), "played.jsonl")
	api := remote.ServerOptions{}.Defaults()
	api.Secret, api.Catalog = testSecret, envs.All()
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site, closer, err := Serve(sctx, ServeOptions{API: api, Find: envs.Find, Records: records, Save: true,
		SaveError: func(err error) { t.Error(err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ts := httptest.NewServer(site)
	defer ts.Close()

	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/#secret="+testSecret))
	waitJS(t, ctx, `document.getElementById("env").value.startsWith("craigslist") && document.querySelectorAll("select.agent").length === 2`, 20*time.Second)
	setSelect(t, ctx, `select.agent[data-seat="1"]`, "scripted")
	do(t, ctx, chromedp.SendKeys("#seed", "7"), chromedp.Click("#create-button"))
	waitJS(t, ctx, `location.pathname === "/ui/episode" && document.getElementById("seats").children.length === 2`, 20*time.Second)
	id := eval[string](t, ctx, `new URLSearchParams(location.search).get("id")`)
	if got := eval[string](t, ctx, `document.querySelector("#seats tr").children[1].textContent`); got != "me" {
		t.Errorf("the buyer's seat is played by %q, want me", got)
	}

	var sent []string
	last := ""
	for k := 0; ; k++ {
		waitJS(t, ctx, `document.body.dataset.done === "true" || (!document.getElementById("turn").classList.contains("hidden") && document.getElementById("turn").dataset.notification !== `+fmt.Sprintf("%q", last)+`)`, 30*time.Second)
		if eval[bool](t, ctx, `document.body.dataset.done === "true"`) {
			break
		}
		last = eval[string](t, ctx, `document.getElementById("turn").dataset.notification`)
		if k == 0 {
			moves := eval[[]string](t, ctx, `[...document.querySelectorAll("#move-choices input")].map((i) => i.value)`)
			if strings.Join(moves, " ") != "PROPOSE REJECT WALK" {
				t.Errorf("the first turn offers moves %v, want PROPOSE REJECT WALK", moves)
			}
			if eval[string](t, ctx, `document.querySelector('#terms [data-field="price"]').type`) != "number" {
				t.Error("the price is no number box")
			}
		}
		if k == 2 {
			shot(t, ctx, "seat-controls")
		}
		if k == 3 {
			// The seller's standing offer, taken: a deal with terms.
			do(t, ctx, chromedp.Click(`#move-choices input[data-move="ACCEPT"]`), chromedp.SendKeys("#say", "Deal."))
			sent = append(sent, eval[string](t, ctx, `document.getElementById("move-preview").textContent`))
			do(t, ctx, chromedp.Click("#send-move"))
		} else {
			sent = append(sent, proposeTurn(t, ctx, fmt.Sprintf("Offer number %d.", k+1), map[string]string{"price": fmt.Sprint(150 + 20*k)}))
		}
		waitJS(t, ctx, `document.body.dataset.done === "true" || document.getElementById("act-result").textContent.startsWith("Sent")`, 30*time.Second)
	}
	if len(sent) == 0 || sent[0] != "SAY: Offer number 1.\nPROPOSE: price=150" {
		t.Fatalf("the page sent %q, want SAY and PROPOSE lines first", sent)
	}
	c := &remote.Client{BaseURL: ts.URL, Secret: testSecret}
	var buyer []string
	for _, e := range allEvents(t, c, id, -1) {
		if e.Kind == engine.KindAction && e.Seat == 0 {
			buyer = append(buyer, e.Text)
		}
	}
	if !slices.Equal(buyer, sent) {
		t.Errorf("the record's buyer moves %q, want the page's %q", buyer, sent)
	}

	// The conversation: both sides as bubbles, the buyer's own on the right.
	type bubble struct {
		Seat       string
		Mine       bool
		Said, Move string
	}
	bubbles := eval[[]bubble](t, ctx, `[...document.querySelectorAll("#chat li.bubble")].map((b) => ({ seat: b.dataset.seat, mine: b.classList.contains("mine"),
		said: (b.querySelector(".said") || {}).textContent || "", move: (b.querySelector(".move") || {}).textContent || "" }))`)
	if len(bubbles) < 2 || bubbles[0].Seat != "0" || !bubbles[0].Mine || bubbles[0].Said != "Offer number 1." || !strings.Contains(bubbles[0].Move, "150") {
		t.Errorf("the conversation starts %+v, want the buyer's own message and offer", bubbles[:min(2, len(bubbles))])
	}
	if !slices.ContainsFunc(bubbles, func(b bubble) bool { return b.Seat == "1" && !b.Mine }) {
		t.Error("the conversation shows nothing of the seller")
	}
	if !eval[bool](t, ctx, `!document.getElementById("chat").classList.contains("hidden") && document.getElementById("events").classList.contains("hidden")`) {
		t.Error("the page does not open on the conversation")
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	shot(t, ctx, "conversation")
	do(t, ctx, chromedp.Click("#toggle-log"))
	if !eval[bool](t, ctx, `document.getElementById("chat").classList.contains("hidden") && !document.getElementById("events").classList.contains("hidden")`) {
		t.Error("one click does not show the protocol log")
	}
	do(t, ctx, chromedp.Click("#toggle-log"))

	// The outcome: terms and each side's reward.
	info, err := c.Episode(context.Background(), id)
	if err != nil || info.Outcome == nil {
		t.Fatalf("episode %+v (%v): no outcome", info, err)
	}
	rewards := eval[[]string](t, ctx, `[...document.querySelectorAll("#outcome-rewards td.reward")].map((td) => td.textContent)`)
	if len(rewards) != 2 || rewards[0] != fmtReward(info.Outcome.Rewards[0]) || rewards[1] != fmtReward(info.Outcome.Rewards[1]) {
		t.Errorf("the outcome shows rewards %v, want %v", rewards, info.Outcome.Rewards)
	}
	terms := eval[string](t, ctx, `document.getElementById("outcome-terms").textContent`)
	if info.Outcome.Result != "deal" || !strings.Contains(terms, "price") || !strings.Contains(terms, "proposed byseller") {
		t.Errorf("the outcome %q shows terms %q, want the deal's price and proposer", info.Outcome.Result, terms)
	}
	if sent[3] != "SAY: Deal.\nACCEPT" {
		t.Errorf("the accepting move was %q", sent[3])
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("outcome").scrollIntoView()`))
	shot(t, ctx, "outcome")

	// The record downloads as JSON and was saved to the records file.
	dir := t.TempDir()
	progress := chromedp.Events(ctx, browser.DownloadProgress)
	do(t, ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: ptr(true)})
		return err
	}), chromedp.Click("#download"))
	var file string
	for ev, err := range progress {
		if err != nil {
			t.Fatal(err)
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			file = filepath.Join(dir, ev.GUID)
			break
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := engine.DecodeRecord(b)
	if err != nil || rec.Seed != 7 || rec.Seats[0].Agent != "me" || rec.Outcome.Result != info.Outcome.Result {
		t.Errorf("the downloaded record %.200s (%v), want seed 7, the buyer played by me", b, err)
	}
	saved, err := engine.LoadRecords(nil, records)
	if err != nil || len(saved) != 1 || saved[0].Seed != 7 || len(saved[0].Events) != len(rec.Events) {
		t.Errorf("the records file holds %d records (%v), want the episode played", len(saved), err)
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/replay"))
	waitJS(t, ctx, `document.querySelectorAll("#records tr").length === 1`, 10*time.Second)

	// Deal or No Deal: each item's count is a select of what the grammar allows.
	do(t, ctx, chromedp.Navigate(ts.URL+"/ui/"))
	waitJS(t, ctx, `document.querySelectorAll("select.agent").length === 2`, 20*time.Second)
	setSelect(t, ctx, "#env", "dealornodeal_v1")
	waitJS(t, ctx, `document.querySelectorAll("select.agent").length === 2`, 10*time.Second)
	setSelect(t, ctx, `select.agent[data-seat="1"]`, "scripted")
	do(t, ctx, chromedp.Click("#create-button"))
	waitJS(t, ctx, `location.pathname === "/ui/episode" && !document.getElementById("move-form").classList.contains("hidden")`, 20*time.Second)
	fields := eval[map[string][]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#terms select")].map((s) => [s.dataset.field, [...s.options].map((o) => o.value)]))`)
	if len(fields) != 3 || len(fields["book"]) < 2 || fields["book"][0] != "0" {
		t.Errorf("deal or no deal's terms %v, want book, hat and ball counts from 0", fields)
	}
}

func ptr[T any](v T) *T { return &v }

// fmtReward is omar.fmt's text of a reward.
func fmtReward(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprint(int64(x))
	}
	if x >= 100 || x <= -100 {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}
