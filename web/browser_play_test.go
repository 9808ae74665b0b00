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
