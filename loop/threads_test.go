package loop

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/train"
)

type threadSetter struct{ set []int }

func (s *threadSetter) SetThreads(n int) error { s.set = append(s.set, n); return nil }

func TestTrainThreads(t *testing.T) {
	fixed := train.Options{Threads: 3}
	if tt := NewTrainThreads(&fixed); tt.auto || fixed.Threads != 3 {
		t.Errorf("threads 3: auto %v, trainer threads %d; want a fixed 3", tt.auto, fixed.Threads)
	}
	auto := train.Options{}
	tt := NewTrainThreads(&auto)
	if !tt.auto || auto.Threads != 1 {
		t.Fatalf("threads 0: auto %v, trainer threads %d; want auto, created with 1", tt.auto, auto.Threads)
	}
	var s threadSetter
	tt.Begin()
	if n, err := tt.Apply(&s); err != nil || n != 1 || len(s.set) != 0 {
		t.Errorf("apply after a window too short to measure: %d, %v, set %v; want 1 and no change", n, err, s.set)
	}
	tt.Begin()
	for end := time.Now().Add(250 * time.Millisecond); time.Now().Before(end); {
	}
	n, err := tt.Apply(&s)
	if err != nil || n < 1 || n > cpuuse.Usable() {
		t.Fatalf("apply: %d, %v; want 1..%d", n, err, cpuuse.Usable())
	}
	if want := n != 1; want != (len(s.set) == 1) || want && s.set[0] != n {
		t.Errorf("apply chose %d threads and set %v", n, s.set)
	}
	if runtime.GOOS == "linux" && cpuuse.Usable() == 1 && n != 1 {
		t.Errorf("one usable core, %d threads", n)
	}
	// A trainer without pauses re-measures once a window is retuneEvery
	// long, and starts the next window.
	s.set = nil
	tt.last, tt.cur = 1, 1
	if err := tt.Tick(&s); err != nil || len(s.set) != 0 {
		t.Errorf("tick within the window: %v, set %v; want nothing", err, s.set)
	}
	for end := time.Now().Add(250 * time.Millisecond); time.Now().Before(end); {
	}
	before := tt.startAt
	tt.startAt = tt.startAt.Add(-retuneEvery)
	if err := tt.Tick(&s); err != nil {
		t.Fatal(err)
	}
	if !tt.startAt.After(before) {
		t.Error("tick did not start a new window")
	}
	if n := tt.last; n < 1 || n > cpuuse.Usable() || (n != 1) != (len(s.set) == 1) {
		t.Errorf("tick chose %d threads and set %v", n, s.set)
	}
	tt = NewTrainThreads(&fixed)
	tt.Begin()
	s.set = nil
	if n, _ := tt.Apply(&s); n != 3 || len(s.set) != 0 {
		t.Errorf("fixed threads: apply gave %d and set %v, want 3 and no change", n, s.set)
	}
	// Scoring beside the rollout takes one thread; the training phase
	// gets its count back.
	if err := tt.beside(&s); err != nil || !slices.Equal(s.set, []int{1}) {
		t.Errorf("beside: %v, set %v; want 1", err, s.set)
	}
	if n, _ := tt.Apply(&s); n != 3 || !slices.Equal(s.set, []int{1, 3}) {
		t.Errorf("apply after beside: %d, set %v; want 3 after 1", n, s.set)
	}
}
