package loop

import (
	"time"

	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/train"
)

// trainThreads is the trainer's CPU thread count of a run whose config sets
// train.threads to 0 (the default): before each training phase, the cores
// that were free while the rollout ran (cpuuse: the machine's idle cores
// plus the ones the process used). A run alone on 2 cores trains on 2
// threads; beside another busy process, on 1 (ggml's threads spin at every
// barrier, and a thread that shares its core with another process makes
// all of them wait). The results do not depend on the count
// (train.TestThreadsDoNotChangeResults), so a run stays deterministic.
//
// A trainer that runs without pauses (omar sft, the built-in model's
// build) re-measures every retuneEvery (tick): its own threads count as
// free, so two threads stay two on an idle machine, and drop to one when
// another process takes a core (the spinning threads then get only part
// of theirs).
type trainThreads struct {
	auto    bool
	start   cpuuse.Sample
	startAt time.Time
	// last is the count of the training phases (fixed, or the last
	// measured); cur the trainer's count now (1 while it scores beside
	// the rollout).
	last, cur int
}

// retuneEvery is the window over which a trainer without pauses measures
// the free cores.
const retuneEvery = 5 * time.Second

// newTrainThreads resolves to.Threads: 0 becomes 1 for the trainer's
// creation, and the count follows the free cores from then on.
func newTrainThreads(to *train.Options) *trainThreads {
	if to.Threads != 0 {
		return &trainThreads{last: to.Threads, cur: to.Threads}
	}
	to.Threads = 1
	return &trainThreads{auto: true, last: 1, cur: 1}
}

// begin starts the window the free cores are measured over (the rollout).
func (t *trainThreads) begin() {
	if t.auto {
		t.start, t.startAt = cpuuse.Read(), time.Now()
	}
}

// tick applies the window since begin to tr once it is retuneEvery long,
// and starts the next one.
func (t *trainThreads) tick(tr any) error {
	if !t.auto || time.Since(t.startAt) < retuneEvery {
		return nil
	}
	_, err := t.apply(tr)
	t.begin()
	return err
}

// beside gives tr one thread, to score beside the rollout's own.
func (t *trainThreads) beside(tr any) error { return t.set(tr, 1) }

// apply sets tr's thread count for a training phase — fixed, or from the
// window since begin when it can be measured (otherwise the last count) —
// and returns the count.
func (t *trainThreads) apply(tr any) (int, error) {
	if t.auto {
		if free, ok := t.start.Free(cpuuse.Read()); ok {
			t.last = cpuuse.Threads(free)
		}
	}
	return t.last, t.set(tr, t.last)
}

func (t *trainThreads) set(tr any, n int) error {
	s, ok := tr.(interface{ SetThreads(int) error })
	if !ok || n == t.cur {
		return nil
	}
	if err := s.SetThreads(n); err != nil {
		return err
	}
	t.cur = n
	return nil
}
