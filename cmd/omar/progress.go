package main

import (
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on stderr that exists only on a terminal;
// elsewhere (CI, pipes, tests) every method does nothing.
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(env *cliEnv, total int, what string) *progress {
	if !env.interactive {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(env.stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

func (p *progress) add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

// set moves the bar to n done (a resumed job starts part of the way).
func (p *progress) set(n int) {
	if p.bar != nil {
		_ = p.bar.Set(n)
	}
}

func (p *progress) describe(s string) {
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
