package web

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestHTTPOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*HTTPOptions)
		want string // "" valid
	}{
		{"defaults", func(*HTTPOptions) {}, ""},
		{"no idle timeout", func(o *HTTPOptions) { o.IdleTimeout = 0 }, "idle timeout"},
		{"header timeout above read timeout", func(o *HTTPOptions) { o.ReadHeaderTimeout = 2 * o.ReadTimeout }, "read header timeout"},
		{"negative write timeout", func(o *HTTPOptions) { o.WriteTimeout = -time.Second }, "write timeout"},
		{"no connections", func(o *HTTPOptions) { o.MaxConns = 0 }, "max connections"},
		{"tiny headers", func(o *HTTPOptions) { o.MaxHeaderBytes = 10 }, "max header bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := HTTPOptions{}.Defaults()
			tc.edit(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// TestListenerCap: the connection beyond the cap reads a 503 and is
// counted; a closed connection gives its place back.
func TestListenerCap(t *testing.T) {
	o := HTTPOptions{}.Defaults()
	o.MaxConns = 1
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listener(inner, o)
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), o)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	get := func(c net.Conn) int {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	first, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if code := get(first); code != http.StatusNoContent {
		t.Fatalf("the first connection: got HTTP %d, want 204", code)
	}
	second, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the connection beyond the cap: got %v, %v; want HTTP 503", resp, err)
	}
	if n := ln.Refused(); n != 1 {
		t.Errorf("got %d refused, want 1", n)
	}
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for ln.Open() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	third, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if code := get(third); code != http.StatusNoContent {
		t.Errorf("after the first closed: got HTTP %d, want 204", code)
	}
}

// TestFitOpenFiles: a cap above the open-file limit is lowered below it,
// one that fits is kept.
func TestFitOpenFiles(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		t.Skipf("no open-file limit to fit (%v)", err)
	}
	o := HTTPOptions{MaxConns: 1 << 30}
	if was := o.FitOpenFiles(); was != 1<<30 || o.MaxConns != max(int(lim.Cur)-64, 16) {
		t.Errorf("lowered %d to %d under the limit %d", was, o.MaxConns, lim.Cur)
	}
	o = HTTPOptions{MaxConns: 16}
	if was := o.FitOpenFiles(); was != 0 || o.MaxConns != 16 {
		t.Errorf("a cap of 16 lowered from %d to %d", was, o.MaxConns)
	}
}

// TestServeUntil: requests are served until the context is done, and then
// ServeUntil returns nil.
func TestServeUntil(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeUntil(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), HTTPOptions{}.Defaults())
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("got %v, %v; want HTTP 204", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeUntil after the context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeUntil still serving 10 s after the context ended")
	}
}
