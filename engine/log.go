package engine

import (
	"context"
	"slices"
	"sort"
	"sync"
)

// Log is an episode's append-only, sequence-numbered event history. It keeps
// one view per seat, filled by the audience filter at append time, and lets
// readers wait for new events (long-poll). It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	seats   []Seat
	all     []Event
	views   [][]Event
	changed chan struct{}
	closed  bool
}

// NewLog returns an empty log for an episode with these seats.
func NewLog(seats []Seat) *Log {
	return &Log{
		seats:   slices.Clone(seats),
		views:   make([][]Event, len(seats)),
		changed: make(chan struct{}),
	}
}

// Append assigns the next sequence number, resolves a team audience to its
// members, and records e. It returns the stored event. Appending to a closed
// log panics: the episode is over.
func (l *Log) Append(e Event) Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		panic("engine: append to a closed log")
	}
	if e.Audience.Team != "" && !e.Audience.All {
		seats := slices.Clone(e.Audience.Seats)
		for _, s := range l.seats {
			if s.Team == e.Audience.Team && !slices.Contains(seats, s.Index) {
				seats = append(seats, s.Index)
			}
		}
		sort.Ints(seats)
		e.Audience.Seats = seats
	}
	e.Seq = int64(len(l.all) + 1)
	l.all = append(l.all, e)
	for i := range l.views {
		if e.Audience.Includes(i) {
			l.views[i] = append(l.views[i], e)
		}
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return e
}

// Close marks the log complete and wakes every waiter.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.changed)
	}
}

// Closed reports whether the episode has ended.
func (l *Log) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Len is the number of events (the sequence number of the last one).
func (l *Log) Len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.all))
}

// All returns the omniscient history. The slice must not be modified.
func (l *Log) All() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[:len(l.all):len(l.all)]
}

// View returns everything seat may see, in order. The slice must not be
// modified. An unknown seat sees nothing.
func (l *Log) View(seat int) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.view(seat)
}

func (l *Log) view(seat int) []Event {
	if seat < 0 || seat >= len(l.views) {
		return nil
	}
	v := l.views[seat]
	return v[:len(v):len(v)]
}

// After returns the events seat may see whose sequence number is greater
// than after. A negative seat reads the omniscient history.
func (l *Log) After(seat int, after int64) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.after(seat, after)
}

func (l *Log) after(seat int, after int64) []Event {
	v := l.all[:len(l.all):len(l.all)]
	if seat >= 0 {
		v = l.view(seat)
	}
	i := sort.Search(len(v), func(i int) bool { return v[i].Seq > after })
	return v[i:]
}

// Wait returns the events seat may see after the cursor, waiting until there
// is at least one, the log is closed, or ctx is done. done reports whether
// the log is closed (no more events will come).
func (l *Log) Wait(ctx context.Context, seat int, after int64) (events []Event, done bool, err error) {
	for {
		l.mu.Lock()
		ev := l.after(seat, after)
		closed := l.closed
		ch := l.changed
		l.mu.Unlock()
		if len(ev) > 0 || closed {
			return ev, closed, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}
