package remote

import (
	"context"
	"fmt"
	"sync"

	"github.com/omar-selfplay/omar/engine"
)

// mailbox is the engine.Agent of a remotely played seat: Act publishes the
// open notification and waits for submit to deliver the answer.
type mailbox struct {
	mu       sync.Mutex
	open     *engine.Turn
	answered bool
	deliver  chan engine.Action
	// opened is closed (and replaced) whenever Act opens a notification.
	opened chan struct{}
}

func newMailbox() *mailbox {
	return &mailbox{deliver: make(chan engine.Action, 1), opened: make(chan struct{})}
}

// Act implements engine.Agent.
func (m *mailbox) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	m.mu.Lock()
	select { // an answer that raced with a timeout belongs to no one
	case <-m.deliver:
	default:
	}
	m.open, m.answered = &t, false
	close(m.opened)
	m.opened = make(chan struct{})
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.open = nil
		m.mu.Unlock()
	}()
	select {
	case a := <-m.deliver:
		return a, nil
	case <-ctx.Done():
		return engine.Action{}, ctx.Err()
	}
}

// errStale explains why an action cannot be taken.
type errStale struct{ got, open string }

func (e errStale) Error() string {
	if e.open == "" {
		return fmt.Sprintf("stale action: notification %q is not open (nothing is awaiting this seat)", e.got)
	}
	return fmt.Sprintf("stale action: notification %q is not open; the open one is %q", e.got, e.open)
}

// submitWait is submit for a notification that may be announced in the
// log but not yet opened by the runtime (the runtime appends all
// notifications of an AskAll before it calls the agents, and a fast client
// can answer in between): while announced reports true it waits for Act.
func (m *mailbox) submitWait(ctx context.Context, a engine.Action, announced func() bool) (ActionResult, error) {
	for {
		m.mu.Lock()
		ch := m.opened
		m.mu.Unlock()
		res, err := m.submit(a)
		if err == nil || !announced() {
			return res, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return res, err
		}
	}
}

// submit hands a over if it answers the open notification. A reply that
// fails validation is still delivered, so the runtime records it against
// the seat's retry budget, and the client learns at once.
func (m *mailbox) submit(a engine.Action) (ActionResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open == nil || m.answered || m.open.Notification.ID != a.NotificationID {
		open := ""
		if m.open != nil && !m.answered {
			open = m.open.Notification.ID
		}
		return ActionResult{}, errStale{got: a.NotificationID, open: open}
	}
	res := ActionResult{Status: "ack"}
	if m.open.Validate != nil {
		if err := m.open.Validate(a.Text); err != nil {
			res = ActionResult{Status: "validation_error", Error: err.Error()}
		}
	}
	m.answered = true
	m.deliver <- a
	return res, nil
}
