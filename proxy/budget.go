package proxy

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sessions are held in two kinds, with separate rules (docs/security.md):
//
//   - A tied session plays an engine seat. Its key is always
//     tiedPrefix+ID+"/seat/"+N, a name no untied call may use, so a caller
//     without the seat's token can neither create it, nor append to it,
//     nor evict it, nor pre-create it for a seat of a future episode.
//     Every call checks the seat's token: the engine server on the first,
//     the token that proved the tie after. Nothing evicts a tied session
//     before its episode ends.
//   - An untied session belongs to the client address that created it
//     and counts against that client's budget of sessions and bytes; at
//     its limit a client evicts its own least recently used session, never
//     another client's nor a tied one.

// tiedPrefix starts the key of every tied session.
const tiedPrefix = "episode/"

// maxKeyLen bounds a session key.
const maxKeyLen = 256

// tiedKey is the session key of an engine seat.
func tiedKey(episode string, seat int) string {
	return tiedPrefix + episode + "/seat/" + strconv.Itoa(seat)
}

// clientOf is the remote IP address of r (the port changes per
// connection): the owner of the untied sessions it creates.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// callBytes estimates what recording a call adds to its session: the
// call's whole prompt and reply (ids, two logprobs), and the segment's
// new tokens with their mask, logprobs and text (about 4 bytes a token).
func callBytes(prompt, fresh, reply int) int64 {
	const overhead = 256
	return int64(4*prompt+12*reply+17*(fresh+reply)) + overhead
}

// lockSession takes the lock of the session get returns, and marks it
// busy (not to be evicted); nil and no error when ctx ended first. A session evicted while the call waited for
// its lock is looked up again: a call never records into a session the
// proxy no longer holds.
func (p *Proxy) lockSession(ctx context.Context, get func() (*session, *APIError)) (*session, *APIError) {
	for {
		s, e := get()
		if e != nil {
			return nil, e
		}
		if err := s.acquire(ctx); err != nil {
			return nil, nil // the client went away while an earlier call of its session ran
		}
		p.mu.Lock()
		gone := s.gone
		if !gone {
			s.busy, s.lastUsed = true, time.Now()
		}
		p.mu.Unlock()
		if !gone {
			return s, nil
		}
		s.release()
	}
}

// unlockSession ends a call of s. A session that a refused call created
// and nothing was recorded in is forgotten: refused calls leave no
// session behind.
func (p *Proxy) unlockSession(s *session) {
	p.mu.Lock()
	s.busy, s.lastUsed = false, time.Now()
	if len(s.calls) == 0 && s.tie == nil && !s.gone {
		p.forget(s)
		p.stats.Sessions--
	}
	p.mu.Unlock()
	s.release()
}

// tiedSession returns the session of the seat t claims, once t's token
// is the seat's.
func (p *Proxy) tiedSession(ctx context.Context, key string, t *tieRequest) (*session, *APIError) {
	check := func(s *session) *APIError {
		if subtle.ConstantTimeCompare([]byte(s.tie.token), []byte(t.token)) != 1 {
			return &APIError{Status: http.StatusForbidden, Code: "seat_token", Param: HeaderSeatToken,
				Message: fmt.Sprintf("episode %s seat %d: wrong seat token", t.episode, t.seat)}
		}
		return nil
	}
	p.mu.Lock()
	s := p.sessions[key]
	p.mu.Unlock()
	if s != nil {
		return s, check(s)
	}
	tie, e := p.verifyTie(ctx, t)
	if e != nil {
		return nil, e
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[key]; s != nil {
		// Another call of the seat tied it meanwhile.
		return s, check(s)
	}
	if p.tied >= p.opts.MaxSessions && !p.evictOne(func(o *session) bool { return o.tie != nil && o.done }) {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: "proxy_full", Type: "server_error",
			Message: fmt.Sprintf("the proxy holds %d seat sessions of running episodes, the most it may (MaxSessions)", p.tied)}
	}
	s = newSession(key)
	s.tie, s.lastUsed = tie, time.Now()
	p.sessions[key] = s
	p.tied++
	p.stats.Sessions++
	p.watchEpisode(t.episode)
	return s, nil
}

// untiedSession returns client's session of key, creating it within the
// client's budget.
func (p *Proxy) untiedSession(key, client string) (*session, *APIError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[key]; s != nil {
		if s.tie != nil || s.client != client {
			return nil, &APIError{Status: http.StatusForbidden, Code: "session_owner", Param: HeaderSession,
				Message: fmt.Sprintf("session %q belongs to another client", key)}
		}
		return s, nil
	}
	own := func(o *session) bool { return o.tie == nil && o.client == client }
	if p.clients[client].sessions >= p.opts.MaxClientSessions && !p.evictOne(own) {
		return nil, &APIError{Status: http.StatusTooManyRequests, Code: "client_sessions",
			Message: fmt.Sprintf("client %s holds %d sessions, all running calls (MaxClientSessions)", client, p.clients[client].sessions)}
	}
	if len(p.sessions)-p.tied >= p.opts.MaxSessions &&
		!p.evictOne(func(o *session) bool { return o.tie == nil && o.done }) && !p.evictOne(own) {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: "proxy_full", Type: "server_error",
			Message: fmt.Sprintf("the proxy holds %d sessions, the most it may (MaxSessions)", len(p.sessions)-p.tied)}
	}
	s := newSession(key)
	s.client, s.lastUsed = client, time.Now()
	p.sessions[key] = s
	u := p.clients[client]
	u.sessions++
	p.clients[client] = u
	p.stats.Sessions++
	return s, nil
}

// admit makes room for a call of s that may record need bytes: within
// its client's budget (untied) and the proxy's, evicting what the rules
// allow, or refuses the call.
func (p *Proxy) admit(s *session, need int64) *APIError {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A call that could not fit with every other session gone evicts
	// nothing.
	if s.tie == nil && s.bytes+need > p.opts.MaxClientBytes || s.bytes+need > p.opts.MaxBytes {
		return &APIError{Status: http.StatusTooManyRequests, Code: "client_bytes",
			Message: fmt.Sprintf("session %q holds %d bytes and this call may add %d, over the %d a client may hold (MaxClientBytes) or the proxy (MaxBytes %d); end the session with the reward API or lower max_tokens",
				s.key, s.bytes, need, p.opts.MaxClientBytes, p.opts.MaxBytes)}
	}
	if s.tie == nil {
		own := func(o *session) bool { return o != s && o.tie == nil && o.client == s.client }
		for p.clients[s.client].bytes+need > p.opts.MaxClientBytes {
			if !p.evictOne(own) {
				return &APIError{Status: http.StatusTooManyRequests, Code: "client_bytes",
					Message: fmt.Sprintf("client %s: its sessions hold %d bytes and this call may add %d, over the %d a client may hold (MaxClientBytes); end sessions with the reward API",
						s.client, p.clients[s.client].bytes, need, p.opts.MaxClientBytes)}
			}
		}
	}
	for p.bytes+need > p.opts.MaxBytes {
		if !p.evictOne(func(o *session) bool { return o != s && o.done }) {
			return &APIError{Status: http.StatusServiceUnavailable, Code: "proxy_full", Type: "server_error",
				Message: fmt.Sprintf("the proxy's sessions hold %d bytes and this call may add %d, over its %d (MaxBytes)", p.bytes, need, p.opts.MaxBytes)}
		}
	}
	return nil
}

// grow counts bytes recorded in s.
func (p *Proxy) grow(s *session, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.gone {
		return
	}
	s.bytes += n
	p.bytes += n
	if s.tie == nil {
		u := p.clients[s.client]
		u.bytes += n
		p.clients[s.client] = u
	}
}

// evictOne forgets the least recently used idle session that may go;
// p.mu is held.
func (p *Proxy) evictOne(may func(*session) bool) bool {
	var lru *session
	for _, s := range p.sessions {
		if !s.busy && may(s) && (lru == nil || s.lastUsed.Before(lru.lastUsed)) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	p.forget(lru)
	p.stats.Evicted++
	return true
}

// forget removes s and its budget; p.mu is held.
func (p *Proxy) forget(s *session) {
	delete(p.sessions, s.key)
	s.gone = true
	p.bytes -= s.bytes
	if s.tie != nil {
		p.tied--
		return
	}
	u := p.clients[s.client]
	u.sessions--
	u.bytes -= s.bytes
	if u.sessions == 0 {
		delete(p.clients, s.client)
	} else {
		p.clients[s.client] = u
	}
}

// validKey checks an untied session key.
func validKey(key string) *APIError {
	switch {
	case len(key) > maxKeyLen:
		return badRequest(HeaderSession, "session key of %d bytes: at most %d", len(key), maxKeyLen)
	case strings.HasPrefix(key, tiedPrefix):
		return badRequest(HeaderSession, "session key %q: keys starting with %q name engine seats, which need %s, %s and %s",
			key, tiedPrefix, HeaderEpisode, HeaderSeat, HeaderSeatToken)
	}
	return nil
}
