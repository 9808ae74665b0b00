package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestOffTerminal: off a terminal a bar writes nothing, and nil bars and
// counters may be used.
func TestOffTerminal(t *testing.T) {
	var w bytes.Buffer
	for _, b := range []*Bar{New(&w, false, 10, "x"), NewElapsed(&w, false, 10, "x"), nil} {
		b.Add(1)
		b.Set(5)
		b.Describe("y")
		b.Clear()
		b.Finish()
		if b.Drawn() {
			t.Error("a bar off a terminal is drawn")
		}
	}
	if w.Len() != 0 {
		t.Errorf("wrote %q off a terminal", w.String())
	}
	var c *Counter
	c.Done()
	c.Finish()
}

// TestOnTerminal: on a terminal the bar draws its description.
func TestOnTerminal(t *testing.T) {
	var w bytes.Buffer
	b := NewElapsed(&w, true, 4, "playing")
	b.Add(1)
	if !strings.Contains(w.String(), "playing") {
		t.Errorf("drew %q, want the description", w.String())
	}
}

// TestCounterLines: off a terminal a counter writes its start and a line
// every tenth of the items, and the last, whichever goroutine ends them.
func TestCounterLines(t *testing.T) {
	var w bytes.Buffer
	c := NewCounter(&w, false, 25, "judging", "judged", "episodes")
	var wg sync.WaitGroup
	for range 25 {
		wg.Go(c.Done)
	}
	wg.Wait()
	c.Finish()
	want := "judging 25 episodes\njudged 2/25 episodes\njudged 4/25 episodes\n"
	if got := w.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "judged 24/25 episodes\njudged 25/25 episodes\n") || strings.Count(got, "\n") != 14 {
		t.Errorf("progress lines:\n%s\nwant the first %q, one every 2 episodes and the last", got, want)
	}
}
