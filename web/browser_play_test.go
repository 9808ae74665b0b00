package web

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
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
