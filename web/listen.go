package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HTTPOptions bound what one client can hold of a server: how long it may
// take to send a request, how long a response may take to write, how long
// an idle keep-alive connection stays open, and how many connections are
// open at once. Without them a client that opens connections and sends
// nothing holds a file descriptor each until the process runs out and
// refuses everyone (docs/security.md).
type HTTPOptions struct {
	// ReadHeaderTimeout bounds the request line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds a response from the end of its request's
	// headers: it must exceed the longest handler (a long-poll, a proxy
	// call's generation). 0: none.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request headers.
	MaxHeaderBytes int
	// MaxConns bounds the open connections; one more is answered 503 and
	// closed at once.
	MaxConns int
}

// Defaults returns 10 s for headers, 60 s per request, 5 min per
// response, 2 min idle, 64 KiB of headers and 4096 connections (every
// remote seat holds one in its long-poll).
func (HTTPOptions) Defaults() HTTPOptions {
	return HTTPOptions{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, WriteTimeout: 5 * time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, MaxConns: 4096}
}

// Validate checks o.
func (o HTTPOptions) Validate() error {
	var errs []error
	if o.ReadHeaderTimeout <= 0 || o.ReadTimeout <= 0 || o.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("read header timeout %v, read timeout %v, idle timeout %v: want all > 0", o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout))
	}
	if o.ReadHeaderTimeout > o.ReadTimeout {
		errs = append(errs, fmt.Errorf("read header timeout %v > read timeout %v", o.ReadHeaderTimeout, o.ReadTimeout))
	}
	if o.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("write timeout %v < 0", o.WriteTimeout))
	}
	if o.MaxHeaderBytes < 1<<10 || o.MaxHeaderBytes > 16<<20 {
		errs = append(errs, fmt.Errorf("max header bytes %d: want 1 KiB to 16 MiB", o.MaxHeaderBytes))
	}
	if o.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("max connections %d < 1", o.MaxConns))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("web: http options: %w", err)
	}
	return nil
}

// FitOpenFiles lowers o.MaxConns to the connections that fit the
// process's open-file limit, keeping 64 descriptors for models, records
// and logs (and 16 connections at least), and returns the cap it lowered
// (0: none, because the cap fits or the limit is unknown or unlimited). A
// cap above the limit would let idle clients take the last descriptors
// and the server refuse everyone.
func (o *HTTPOptions) FitOpenFiles() (lowered int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	if n := max(int(lim.Cur)-64, 16); o.MaxConns > n {
		lowered, o.MaxConns = o.MaxConns, n
	}
	return lowered
}

// NewHTTPServer returns a server of h with o's timeouts. Serve it on
// Listener(ln, o), which applies the connection cap.
func NewHTTPServer(h http.Handler, o HTTPOptions) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, MaxHeaderBytes: o.MaxHeaderBytes}
}

// ServeUntil serves h on ln with o's timeouts and connection cap until
// the server fails or ctx is done; then requests in flight have 5 s to
// finish (a long-poll still waiting is cut) and it returns nil.
func ServeUntil(ctx context.Context, ln net.Listener, h http.Handler, o HTTPOptions) error {
	hs := NewHTTPServer(h, o)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(Listener(ln, o)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
}

// Listener wraps ln so that at most o.MaxConns accepted connections are
// open. A connection beyond the cap gets "503 Service Unavailable" and is
// closed, rather than waiting unanswered in the kernel's queue: the client
// learns at once that the server is full.
func Listener(ln net.Listener, o HTTPOptions) *LimitListener {
	return &LimitListener{Listener: ln, max: int64(o.MaxConns)}
}

// LimitListener is a listener with a connection cap (see Listener).
type LimitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Int64
}

// Open returns the connections open now.
func (l *LimitListener) Open() int { return int(l.open.Load()) }

// Refused returns the connections refused for the cap so far.
func (l *LimitListener) Refused() int64 { return l.refused.Load() }

// full is what a connection beyond the cap reads.
var full = func() string {
	body := "server full: too many open connections; retry later\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// Accept implements net.Listener.
func (l *LimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		// Answered off the accept loop, with a deadline: a client that
		// does not read cannot stall the listener.
		go func() {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte(full))
			_ = c.Close()
		}()
	}
}

// limitedConn gives its place back once, however often it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// WriteBanner writes what omar serve says once it listens on addr: the
// routes, and how to get the secret. A secret the operator chose (given)
// is not echoed, as it may end up in a log; a drawn one must be, or
// nobody could create an episode. env names the variable that holds a
// chosen secret.
func WriteBanner(w io.Writer, addr, secret string, given bool, env string) {
	fmt.Fprintf(w, "omar serve: listening on http://%s (web page /ui/; POST /v1/episodes; GET /v1/episodes/{id}/events; POST /v1/episodes/{id}/actions)\n", addr)
	if given {
		fmt.Fprintln(w, "omar serve: creating and listing episodes needs the secret given by --secret or $"+env+" (Authorization: Bearer …)")
		return
	}
	fmt.Fprintf(w, "omar serve: secret for creating and listing episodes (Authorization: Bearer …): %s\n", secret)
	fmt.Fprintf(w, "omar serve: web page with the secret: http://%s/ui/#secret=%s\n", addr, secret)
}
