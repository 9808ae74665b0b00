package tensorboard

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/internal/tensorboard/tbtest"
)

func TestScalarsReadBack(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_765_000_000, 250_000_000)
	w, err := create(filepath.Join(dir, "tb"), func() time.Time { clock = clock.Add(time.Second); return clock })
	if err != nil {
		t.Fatal(err)
	}
	steps := []map[string]float64{
		{"actor/pg_loss": -0.125, "critic/rewards/mean": 0.5, "timing_s/gen": 12.75},
		{"actor/pg_loss": 0.03125, "critic/rewards/mean": 0.625, "actor/entropy": 1e-7, "big": 3e38},
		{},
	}
	for i, s := range steps {
		if err := w.Scalars(int64(i+1), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents.") {
		t.Errorf("file name %q: TensorBoard reads events.out.tfevents.*", w.Path())
	}
	evs, err := tbtest.ReadEvents(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1+len(steps) {
		t.Fatalf("got %d events, want %d", len(evs), 1+len(steps))
	}
	if evs[0].Version != "brain.Event:2" {
		t.Errorf("first event: file_version %q, want brain.Event:2", evs[0].Version)
	}
	for i, s := range steps {
		ev := evs[i+1]
		if ev.Step != int64(i+1) || ev.WallTime <= evs[i].WallTime {
			t.Errorf("event %d: step %d wall %v, want step %d after %v", i+1, ev.Step, ev.WallTime, i+1, evs[i].WallTime)
		}
		if len(ev.Values) != len(s) {
			t.Errorf("event %d: %d values, want %d", i+1, len(ev.Values), len(s))
		}
		for tag, v := range s {
			if got := ev.Values[tag]; got != float32(v) {
				t.Errorf("event %d %s: got %v, want %v", i+1, tag, got, float32(v))
			}
		}
	}
}

func TestCreateTwice(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return time.Unix(5, 0) }
	a, err := create(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := create(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if a.Path() == b.Path() {
		t.Errorf("two writers in one second share %s", a.Path())
	}
	a.Close()
	b.Close()
}
