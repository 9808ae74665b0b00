package loop

import (
	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/train"
)

// trainThreads is the trainer's CPU thread count of a run whose config sets
// train.threads to 0 (the default): before each training phase, the cores
// that were free while the rollout ran (cpuuse: the machine's idle cores
// plus the one the rollout used). A run alone on 2 cores trains on 2
// threads; beside another busy process, on 1 (ggml's threads spin at every
// barrier, and a thread that shares its core with another process makes
// all of them wait). The results do not depend on the count
// (train.TestThreadsDoNotChangeResults), so a run stays deterministic.
type trainThreads struct {
	auto  bool
	start cpuuse.Sample
	last  int
}

// newTrainThreads resolves to.Threads: 0 becomes 1 for the trainer's
// creation, and the count follows the free cores from then on.
func newTrainThreads(to *train.Options) *trainThreads {
	if to.Threads != 0 {
		return &trainThreads{last: to.Threads}
	}
	to.Threads = 1
	return &trainThreads{auto: true, last: 1}
}

// begin starts the window the free cores are measured over (the rollout).
func (t *trainThreads) begin() {
	if t.auto {
		t.start = cpuuse.Read()
	}
}

// apply sets tr's thread count from the window since begin (when it can be
// measured; otherwise the count stays) and returns the count.
func (t *trainThreads) apply(tr any) (int, error) {
	s, ok := tr.(interface{ SetThreads(int) error })
	if !t.auto || !ok {
		return t.last, nil
	}
	free, ok := t.start.Free(cpuuse.Read())
	if !ok {
		return t.last, nil
	}
	n := cpuuse.Threads(free)
	if n != t.last {
		if err := s.SetThreads(n); err != nil {
			return t.last, err
		}
		t.last = n
	}
	return n, nil
}
