package loop

import (
	"time"

	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/train"
)

// TrainThreads is the trainer's CPU thread count of a run whose config sets
// train.threads to 0 (the default), and of the trainers that packages bc
// and recipes build beside a run's parts: before each training phase, the
// cores that were free while the rollout ran (cpuuse: the machine's idle
// cores plus the ones the process used). A run alone on 2 cores trains on 2
// threads; beside another busy process, on 1 (ggml's threads spin at every
// barrier, and a thread that shares its core with another process makes
// all of them wait). The results do not depend on the count
// (train.TestThreadsDoNotChangeResults), so a run stays deterministic.
//
// A trainer that runs without pauses (omar sft, the built-in model's
// build) re-measures every retuneEvery (Tick): its own threads count as
// free, so two threads stay two on an idle machine, and drop to one when
// another process takes a core (the spinning threads then get only part
// of theirs).
type TrainThreads struct {
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

// NewTrainThreads resolves to.Threads: 0 becomes 1 for the trainer's
// creation, and the count follows the free cores from then on (Begin a
// window, then Apply or Tick).
func NewTrainThreads(to *train.Options) *TrainThreads {
	if to.Threads != 0 {
		return &TrainThreads{last: to.Threads, cur: to.Threads}
	}
	to.Threads = 1
	return &TrainThreads{auto: true, last: 1, cur: 1}
}

// Begin starts the window the free cores are measured over (the rollout).
func (t *TrainThreads) Begin() {
	if t.auto {
		t.start, t.startAt = cpuuse.Read(), time.Now()
	}
}

// Tick applies the window since Begin to tr once it is retuneEvery long,
// and starts the next one.
func (t *TrainThreads) Tick(tr any) error {
	if !t.auto || time.Since(t.startAt) < retuneEvery {
		return nil
	}
	_, err := t.Apply(tr)
	t.Begin()
	return err
}

// beside gives tr one thread, to score beside the rollout's own.
func (t *TrainThreads) beside(tr any) error { return t.set(tr, 1) }

// Apply sets tr's thread count for a training phase — fixed, or from the
// window since Begin when it can be measured (otherwise the last count) —
// and returns the count.
func (t *TrainThreads) Apply(tr any) (int, error) {
	if t.auto {
		if free, ok := t.start.Free(cpuuse.Read()); ok {
			t.last = cpuuse.Threads(free)
		}
	}
	return t.last, t.set(tr, t.last)
}

func (t *TrainThreads) set(tr any, n int) error {
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
