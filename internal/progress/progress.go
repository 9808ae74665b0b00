// Package progress shows how far a long job is: a bar on a terminal, and
// nothing (or, for Counter, a line now and then) where no one watches one
// redraw: CI, pipes, tests. Every method of a nil *Bar or *Counter does
// nothing, so a job's hooks may report before its bar exists.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar is a progress bar on a terminal; elsewhere its methods do nothing.
type Bar struct{ bar *progressbar.ProgressBar }

// New returns a bar of total steps (-1: unknown) described as what,
// drawn on w when terminal is true: the count, the rate and a predicted
// time left.
func New(w io.Writer, terminal bool, total int, what string) *Bar {
	if !terminal {
		return &Bar{}
	}
	return &Bar{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// NewElapsed returns a bar like New's that shows the elapsed time and no
// prediction, for a job whose description carries a better estimate than
// one from the steps alone (a training run's evaluations take time that
// its iteration count does not show).
func NewElapsed(w io.Writer, terminal bool, total int, what string) *Bar {
	if !terminal {
		return &Bar{}
	}
	return &Bar{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
	)}
}

// Drawn reports whether the bar is drawn (on a terminal).
func (b *Bar) Drawn() bool { return b != nil && b.bar != nil }

// Add moves the bar n steps on.
func (b *Bar) Add(n int) {
	if b.Drawn() {
		_ = b.bar.Add(n)
	}
}

// Set moves the bar to n steps done (a resumed job starts part of the way).
func (b *Bar) Set(n int) {
	if b.Drawn() {
		_ = b.bar.Set(n)
	}
}

// Describe replaces the bar's description.
func (b *Bar) Describe(s string) {
	if b.Drawn() {
		b.bar.Describe(s)
	}
}

// Clear erases the bar until its next update, so that a line can be
// written under it.
func (b *Bar) Clear() {
	if b.Drawn() {
		_ = b.bar.Clear()
	}
}

// Finish completes the bar and erases it.
func (b *Bar) Finish() {
	if b.Drawn() {
		_ = b.bar.Finish()
	}
}

// Counter counts items that take seconds to minutes each, done by
// concurrent workers: a bar on a terminal, otherwise a line on w every
// tenth of the items (at least every 50). Done is safe for concurrent
// use.
type Counter struct {
	bar          *Bar
	w            io.Writer // nil on a terminal: the bar shows the count
	done, noun   string
	total, every int
	mu           sync.Mutex
	n            int
}

// NewCounter returns a counter of total items of noun ("episodes"):
// "<doing> 10 episodes" at the start, "<done> 3/10 episodes" as they end.
func NewCounter(w io.Writer, terminal bool, total int, doing, done, noun string) *Counter {
	c := &Counter{bar: New(w, terminal, total, doing), done: done, noun: noun, total: total, every: min(max(total/10, 1), 50)}
	if !terminal {
		c.w = w
		fmt.Fprintf(w, "%s %d %s\n", doing, total, noun)
	}
	return c
}

// Done counts one item done.
func (c *Counter) Done() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.bar.Add(1)
	if c.w != nil && (c.n%c.every == 0 || c.n == c.total) {
		fmt.Fprintf(c.w, "%s %d/%d %s\n", c.done, c.n, c.total, c.noun)
	}
}

// Finish completes the counter's bar.
func (c *Counter) Finish() {
	if c != nil {
		c.bar.Finish()
	}
}
