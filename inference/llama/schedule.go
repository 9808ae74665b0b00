package llama

import (
	"context"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/inference"
)

// Session is a caller of the deterministic schedule
// (inference.Scheduler): while a session has no request in flight the
// loop decodes nothing, so every step holds the same sequences whatever
// the callers' timing. Sessions' submissions arriving while the loop waits
// are admitted in session order.
type Session struct {
	b  *Backend // the context whose loop the session is in
	st *session
	// sched is the Backend over several contexts that opened the session
	// on b, one of them; nil when b opened it.
	sched *Backend
	once  sync.Once
}

// session is a Session's state, owned by the loop goroutine.
type session struct {
	order int
	// outstanding counts the session's jobs queued or running; at 0 the
	// session owes the loop its next submission (or Close).
	outstanding int
}

// sessionMsg opens or closes a session in the loop.
type sessionMsg struct {
	st    *session
	close bool
}

var (
	_ inference.Scheduler = (*Backend)(nil)
	_ inference.Session   = (*Session)(nil)
)

// Session implements inference.Scheduler. It returns once the loop knows
// the session, which from then on waits for the session's first
// submission before it decodes.
func (b *Backend) Session(order int) inference.Session {
	if b.contexts != nil {
		n := len(b.contexts)
		s := b.contexts[(order%n+n)%n].Session(order).(*Session)
		s.sched = b
		return s
	}
	st := &session{order: order}
	select {
	case b.sessionCh <- sessionMsg{st: st}:
	case <-b.quit:
	}
	return &Session{b: b, st: st}
}

// GenerateEach implements inference.EachGenerator for the session's
// caller.
func (s *Session) GenerateEach(ctxs []context.Context, reqs []inference.Request) ([]inference.Response, []error) {
	return s.b.generateEach(context.Background(), ctxs, reqs, s.st)
}

// Scheduler implements inference.Session: the Backend that opened it.
func (s *Session) Scheduler() inference.Scheduler {
	if s.sched != nil {
		return s.sched
	}
	return s.b
}

// Close ends the session: the loop no longer waits for it.
func (s *Session) Close() {
	s.once.Do(func() {
		select {
		case s.b.sessionCh <- sessionMsg{st: s.st, close: true}:
		case <-s.b.quit:
		}
	})
}

// handleSession applies a session message (loop goroutine).
func (b *Backend) handleSession(m sessionMsg) {
	if m.close {
		b.sessions = deleteSession(b.sessions, m.st)
		return
	}
	b.sessions = append(b.sessions, m.st)
}

func deleteSession(ss []*session, st *session) []*session {
	for i, s := range ss {
		if s == st {
			return append(ss[:i], ss[i+1:]...)
		}
	}
	return ss
}

// owing reports whether an open session has nothing in flight: its
// caller is preparing the next submission, which must join the next step.
func (b *Backend) owing() bool {
	for _, s := range b.sessions {
		if s.outstanding == 0 {
			return true
		}
	}
	return false
}

// enqueue queues submitted jobs, counting them against their sessions.
func (b *Backend) enqueue(js []*job) {
	for _, j := range js {
		j.arrived = b.clock
		if j.sess != nil {
			j.sess.outstanding++
		}
	}
	b.queue = append(b.queue, js...)
}

// sessionOf returns the state of b's session ctx carries, or nil.
func (b *Backend) sessionOf(ctx context.Context) *session {
	if s, ok := inference.SessionOf(ctx).(*Session); ok && s.b == b {
		return s.st
	}
	return nil
}

// outsiders reports whether requests from no session are queued and
// whether one is running. A queued one that waits outsiderWait for the
// sessions is decoded anyway, and the loop then steps without waiting for
// sessions until it is done (Stats.ScheduleBypasses): a caller holding a
// session that asked the backend under a context without it
// (inference.WithSession) would otherwise wait for itself forever.
func (b *Backend) outsiders() (queued, running bool) {
	for _, j := range b.queue {
		if j.sess == nil {
			queued = true
			break
		}
	}
	for _, s := range b.slots {
		if s.job != nil && s.job.sess == nil {
			running = true
			break
		}
	}
	return queued, running
}

// outsiderRunning reports whether a request from no session is being
// decoded (out of turn, see outsiders).
func (b *Backend) outsiderRunning() bool {
	_, running := b.outsiders()
	return running
}

// waitsForSession reports whether the loop must wait for a session before
// it decodes: one owes its submission and no request is being decoded out
// of turn.
func (b *Backend) waitsForSession() bool {
	if !b.owing() {
		return false
	}
	queued, running := b.outsiders()
	return !queued && !running
}

var outsiderWait = 5 * time.Second
