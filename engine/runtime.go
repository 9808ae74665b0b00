package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// ErrTimeout may be returned (wrapped) by an agent that gives up waiting;
// the runtime treats it like a deadline: the inert default is applied.
var ErrTimeout = errors.New("engine: agent timed out")

// Options tune the runtime.
type Options struct {
	// MaxRetries is how many more attempts a seat gets after an invalid
	// action before the inert default is applied.
	MaxRetries int
	// Timeout bounds one attempt of one seat; 0 means no limit.
	Timeout time.Duration
}

// DefaultOptions are the runtime defaults: two retries, no timeout.
func DefaultOptions() Options { return Options{MaxRetries: 2} }

// Validate checks o.
func (o Options) Validate() error {
	if o.MaxRetries < 0 {
		return fmt.Errorf("engine: max retries %d < 0", o.MaxRetries)
	}
	if o.Timeout < 0 {
		return fmt.Errorf("engine: timeout %v < 0", o.Timeout)
	}
	return nil
}

// Question is what an episode asks one seat.
type Question struct {
	Seat  int
	Text  string
	Legal []string
	// Grammar (GBNF) of valid replies, for constrained decoding.
	Grammar string
	Data    any
	// Parse validates a reply and returns the move it stands for. Its error
	// message is shown to the seat, so make it say what to fix. It must be a
	// pure function of text: transports call it concurrently to answer
	// remote clients at once.
	Parse func(text string) (any, error)
	// Default is the inert action applied after a timeout or when the retry
	// budget is spent. It must parse.
	Default string
}

// Answer is a seat's validated reply.
type Answer struct {
	Seat int
	Text string
	Move any
	// Defaulted reports that the inert default was applied.
	Defaulted bool
	// Attempts counts the replies the seat gave (0 after a first timeout).
	Attempts int
	// Invalid counts the replies that failed validation or were stale.
	Invalid int
}

// Runtime carries one episode's log and agents. Episodes call Brief,
// Broadcast, Phase, Ask and AskAll from a single goroutine.
type Runtime struct {
	log    *Log
	seats  []Seat
	agents []Agent
	opts   Options
	nextID int
}

// NewRuntime returns a runtime for seats played by agents (by seat index).
func NewRuntime(seats []Seat, agents []Agent, opts Options) (*Runtime, error) {
	if len(agents) != len(seats) {
		return nil, fmt.Errorf("engine: %d agents for %d seats", len(agents), len(seats))
	}
	for i, s := range seats {
		if s.Index != i {
			return nil, fmt.Errorf("engine: seat %q has index %d, want %d", s.Name, s.Index, i)
		}
		if agents[i] == nil {
			return nil, fmt.Errorf("engine: seat %d (%s) has no agent", i, s.Name)
		}
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Runtime{log: NewLog(seats), seats: seats, agents: agents, opts: opts}, nil
}

// Log is the episode's event log.
func (rt *Runtime) Log() *Log { return rt.log }

// Seats are the episode's seats.
func (rt *Runtime) Seats() []Seat { return rt.seats }

// Emit appends a raw event. Seat defaults to -1 when the event is about no
// seat; callers set it explicitly otherwise.
func (rt *Runtime) Emit(e Event) Event { return rt.log.Append(e) }

// Brief sends seat its private instructions.
func (rt *Runtime) Brief(seat int, text string, data any) {
	rt.log.Append(Event{Kind: KindBriefing, Audience: Only(seat), Seat: seat, Text: text, Data: data})
}

// Broadcast records an observation for aud; seat is the seat it is about
// (-1 for none).
func (rt *Runtime) Broadcast(aud Audience, seat int, text string, data any) {
	rt.log.Append(Event{Kind: KindObservation, Audience: aud, Seat: seat, Text: text, Data: data})
}

// Phase announces a phase change to everyone.
func (rt *Runtime) Phase(text string, data any) {
	rt.log.Append(Event{Kind: KindPhase, Audience: Everyone(), Seat: -1, Text: text, Data: data})
}

// Ask asks one seat and returns its validated answer, or the default.
// The error is non-nil only when ctx is done or the agent failed for a
// reason other than a timeout.
func (rt *Runtime) Ask(ctx context.Context, q Question) (Answer, error) {
	a, err := rt.AskAll(ctx, []Question{q})
	if err != nil {
		return Answer{}, err
	}
	return a[0], nil
}

// AskAll asks several seats at once. Every seat is notified before any
// agent is called, agents run concurrently, and all replies are collected
// and recorded (in question order, so logs are deterministic) before any is
// returned; seats whose reply failed validation are asked again together.
func (rt *Runtime) AskAll(ctx context.Context, qs []Question) ([]Answer, error) {
	answers := make([]Answer, len(qs))
	seen := map[int]bool{}
	for i, q := range qs {
		if q.Seat < 0 || q.Seat >= len(rt.seats) {
			return nil, fmt.Errorf("engine: question for unknown seat %d", q.Seat)
		}
		if seen[q.Seat] {
			return nil, fmt.Errorf("engine: seat %d asked twice at once", q.Seat)
		}
		seen[q.Seat] = true
		if q.Parse == nil {
			return nil, fmt.Errorf("engine: question for seat %d has no parser", q.Seat)
		}
		answers[i].Seat = q.Seat
	}
	pending := make([]int, len(qs))
	for i := range qs {
		pending[i] = i
	}
	for attempt := 1; len(pending) > 0; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		turns := make([]Turn, len(pending))
		for j, i := range pending {
			q := qs[i]
			rt.nextID++
			n := Notification{
				ID: "n" + strconv.Itoa(rt.nextID), Seat: q.Seat, Text: q.Text,
				Legal: q.Legal, Grammar: q.Grammar, Attempt: attempt, Data: q.Data,
			}
			rt.log.Append(Event{
				Kind: KindNotification, Audience: Only(q.Seat), Seat: q.Seat, NotificationID: n.ID,
				Text: q.Text, Legal: q.Legal, Grammar: q.Grammar, Data: q.Data,
			})
			parse := q.Parse
			turns[j] = Turn{Notification: n, Seat: rt.seats[q.Seat], Validate: func(text string) error {
				_, err := parse(text)
				return err
			}}
		}
		// Views are taken after every notification is in the log, so no
		// seat learns who else was asked and nothing is appended while the
		// agents run.
		for j := range turns {
			turns[j].View = rt.log.View(turns[j].Seat.Index)
		}
		actions, errs := rt.call(ctx, turns)
		var next []int
		for j, i := range pending {
			q, n := qs[i], turns[j].Notification
			a := &answers[i]
			timedOut := false
			if err := errs[j]; err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTimeout) {
					return nil, fmt.Errorf("engine: seat %d (%s): %w", q.Seat, rt.seats[q.Seat].Name, err)
				}
				timedOut = true
			}
			if timedOut {
				rt.applyDefault(q, n, a, "timeout")
				continue
			}
			a.Attempts++
			act := actions[j]
			rt.log.Append(Event{Kind: KindAction, Audience: Only(q.Seat), Seat: q.Seat, NotificationID: n.ID, Text: act.Text})
			var move any
			err := error(nil)
			if act.NotificationID != n.ID {
				err = fmt.Errorf("stale action: it answers notification %q, the open one is %q", act.NotificationID, n.ID)
			} else {
				move, err = q.Parse(act.Text)
			}
			if err != nil {
				a.Invalid++
				rt.log.Append(Event{Kind: KindValidationError, Audience: Only(q.Seat), Seat: q.Seat, NotificationID: n.ID, Text: err.Error()})
				if a.Attempts > rt.opts.MaxRetries {
					rt.applyDefault(q, n, a, "retries exhausted")
				} else {
					next = append(next, i)
				}
				continue
			}
			rt.log.Append(Event{Kind: KindAck, Audience: Only(q.Seat), Seat: q.Seat, NotificationID: n.ID})
			a.Text, a.Move = act.Text, move
		}
		pending = next
	}
	return answers, nil
}

func (rt *Runtime) applyDefault(q Question, n Notification, a *Answer, why string) {
	move, err := q.Parse(q.Default)
	if err != nil {
		// A default that does not parse is a bug in the game, not the agent's.
		panic(fmt.Sprintf("engine: default action %q for seat %d does not parse: %v", q.Default, q.Seat, err))
	}
	rt.log.Append(Event{
		Kind: KindDefault, Audience: Only(q.Seat), Seat: q.Seat, NotificationID: n.ID,
		Text: fmt.Sprintf("%s: the default action %q was applied", why, q.Default),
		Data: map[string]string{"reason": why, "action": q.Default},
	})
	a.Text, a.Move, a.Defaulted = q.Default, move, true
}

// call runs the agents of turns concurrently (one goroutine when alone),
// after telling every Preparer among them that it will be asked.
func (rt *Runtime) call(ctx context.Context, turns []Turn) ([]Action, []error) {
	actions := make([]Action, len(turns))
	errs := make([]error, len(turns))
	one := func(j int) {
		c := ctx
		if rt.opts.Timeout > 0 {
			var cancel context.CancelFunc
			c, cancel = context.WithTimeout(ctx, rt.opts.Timeout)
			defer cancel()
		}
		actions[j], errs[j] = rt.agents[turns[j].Seat.Index].Act(c, turns[j])
	}
	for _, t := range turns {
		if p, ok := rt.agents[t.Seat.Index].(Preparer); ok {
			p.Prepare(t)
		}
	}
	if len(turns) == 1 {
		one(0)
		return actions, errs
	}
	var wg sync.WaitGroup
	for j := range turns {
		wg.Go(func() { one(j) })
	}
	wg.Wait()
	return actions, errs
}
