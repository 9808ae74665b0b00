package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/web"
	"gopkg.in/yaml.v3"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeSecret: omar serve prints a drawn secret, creating an episode
// needs it, and a secret given by flag is used but not echoed.
func TestServeSecret(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret string
	}{{"drawn", ""}, {"given", "operator-secret-1234"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var out, errb syncBuffer
			args := []string{"--addr", "127.0.0.1:0"}
			if tc.secret != "" {
				args = append(args, "--secret", tc.secret)
			}
			done := make(chan error, 1)
			go func() { done <- runServe(ctx, &cliEnv{stdout: &out, stderr: &errb}, args) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			addr := regexp.MustCompile(`listening on (http://\S+)`)
			var base string
			for range 200 {
				if m := addr.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "secret") {
					base = m[1]
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if base == "" {
				t.Fatalf("no address printed; stdout %q, stderr %q", out.String(), errb.String())
			}
			secret := tc.secret
			if m := regexp.MustCompile(`Bearer …\): (\S+)`).FindStringSubmatch(out.String()); m != nil {
				secret = m[1]
			}
			if tc.secret != "" && strings.Count(out.String(), tc.secret) > 0 {
				t.Errorf("the given secret was echoed: %q", out.String())
			}
			if len(secret) < remote.MinSecretLen {
				t.Fatalf("secret %q from output %q", secret, out.String())
			}
			req := remote.CreateRequest{Env: "sealedbid", Agents: []string{"scripted"}}
			var se *remote.StatusError
			if _, err := (&remote.Client{BaseURL: base}).Create(ctx, req); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
				t.Errorf("create without the secret: got %v, want HTTP 401", err)
			}
			info, err := (&remote.Client{BaseURL: base, Secret: secret}).Create(ctx, req)
			if err != nil {
				t.Fatalf("create with the secret: %v", err)
			}
			if info.Seed == nil {
				t.Error("the creator got no seed")
			}
		})
	}
	t.Run("short secret", func(t *testing.T) {
		err := runServe(context.Background(), &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, []string{"--addr", "127.0.0.1:0", "--secret", "abc"})
		if !errors.Is(err, cliflag.ErrUsage) || !strings.Contains(err.Error(), "secret of 3 bytes") {
			t.Errorf("got %v, want a usage error about the secret's length", err)
		}
	})
}

// TestServeWebFlags: --records and --run reach the web page's feeds, the
// page is served, and a bad player spec or run directory is a usage error.
func TestServeWebFlags(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "r.jsonl")
	if _, _, code := runCLI(t, "play", "--env", "sealedbid", "--episodes", "3", "--out", records); code != 0 {
		t.Fatalf("omar play exited %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, &cliEnv{stdout: &out, stderr: &errb}, []string{"--addr", "127.0.0.1:0", "--records", records, "--run", dir})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var link []string
	for range 200 {
		if link = regexp.MustCompile(`(http://\S+)/ui/#secret=(\S+)`).FindStringSubmatch(out.String()); link != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if link == nil {
		t.Fatalf("no link to the page printed: %q", out.String())
	}
	for _, tc := range []struct{ path, want string }{
		{"/v1/site", `"records":3`},
		{"/v1/site", `"run":true`},
		{"/ui/", "New episode"},
	} {
		resp, err := http.Get(link[1] + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s = %s, want it to contain %s", tc.path, body, tc.want)
		}
	}
	for _, args := range [][]string{{"--players", "nonsense"}, {"--run", filepath.Join(dir, "missing")}} {
		if err := runServe(context.Background(), &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, append([]string{"--addr", "127.0.0.1:0"}, args...)); !errors.Is(err, cliflag.ErrUsage) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

// startServe runs omar serve with args on a loopback port and returns its
// base URL; the server stops when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, &cliEnv{stdout: &out, stderr: &errb}, append([]string{"--addr", "127.0.0.1:0"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	addr := regexp.MustCompile(`listening on (http://\S+)`)
	for range 300 {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v; stderr %q", err, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("no address printed; stdout %q, stderr %q", out.String(), errb.String())
	return ""
}

// closedWithin reports whether the server closes c (after answering
// whatever it answers) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// TestServeClosesSlowAndIdleClients: omar serve drops a client that sends
// its headers too slowly, a request body too slowly, or keeps a
// connection idle, and answers 503 beyond its connection cap — before,
// 300 idle connections under a 256-file limit made it refuse everyone
// (issue 52, defect 6).
func TestServeClosesSlowAndIdleClients(t *testing.T) {
	base := startServe(t, "--secret", "operator-secret-1234", "--read-header-timeout", "200ms", "--read-timeout", "400ms",
		"--idle-timeout", "300ms", "--max-conns", "3")
	host := strings.TrimPrefix(base, "http://")
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("slow headers", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /v1/envs HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 5*time.Second) {
			t.Error("a client that never ends its headers is still connected after 5 s, want closed after 200 ms")
		}
	})
	t.Run("slow body", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "POST /v1/episodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer operator-secret-1234\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"env\":"); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 5*time.Second) {
			t.Error("a client that never ends its body is still connected after 5 s, want closed after 400 ms")
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /v1/envs HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/envs: got HTTP %d, want 200", resp.StatusCode)
		}
		if !closedWithin(c, 5*time.Second) {
			t.Error("an idle keep-alive connection is still open after 5 s, want closed after 300 ms")
		}
	})
	t.Run("connection cap", func(t *testing.T) {
		// Its own server, whose idle connections outlive a loaded
		// machine's scheduling delays.
		base := startServe(t, "--read-header-timeout", "1s", "--read-timeout", "2s", "--idle-timeout", "1s", "--max-conns", "3")
		host := strings.TrimPrefix(base, "http://")
		for range 3 {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
		// The listener counts a connection when it accepts it: let it.
		time.Sleep(100 * time.Millisecond)
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("the connection beyond the cap: %v, want a 503 answer", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("the connection beyond the cap: got HTTP %d, want 503", resp.StatusCode)
		}
		// The idle ones time out; then new clients are served again.
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err := http.Get(base + "/v1/envs")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no client served 5 s after the idle connections: last %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("write timeout below max wait", func(t *testing.T) {
		err := runServe(context.Background(), &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, []string{"--addr", "127.0.0.1:0", "--write-timeout", "10s"})
		if !errors.Is(err, cliflag.ErrUsage) || !strings.Contains(err.Error(), "--max-wait") {
			t.Errorf("got %v, want a usage error naming --max-wait", err)
		}
	})
}

// TestServeLoad is a bounded load test of omar serve on loopback: 16
// clients send 480 requests in all — creating scripted episodes with the
// secret, reading them and their omniscient logs, and unauthenticated
// probes that must be refused — within a 60 s budget, every answer the
// expected one, and the server serves a new client afterwards. It guards
// the connection handling and the limits, not a speed (docs/security.md).
func TestServeLoad(t *testing.T) {
	const (
		clients  = 16
		requests = 480
		secret   = "operator-secret-1234"
	)
	base := startServe(t, "--secret", secret)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	operator := &remote.Client{BaseURL: base, Secret: secret}
	anon := &remote.Client{BaseURL: base}
	jobs := make(chan int)
	errs := make(chan error, requests)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range jobs {
				errs <- loadStep(ctx, operator, anon, base, i)
			}
		})
	}
	for i := range requests / 4 {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed++; failed <= 5 {
				t.Error(err)
			}
		}
	}
	if failed > 0 || ctx.Err() != nil {
		t.Fatalf("%d of %d steps failed; budget: %v", failed, requests/4, ctx.Err())
	}
	resp, err := http.Get(base + "/v1/envs")
	if err != nil {
		t.Fatalf("after the load: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the load: GET /v1/envs answered %d", resp.StatusCode)
	}
}

// loadStep sends four requests: a create, a read of the episode with the
// secret, one without any token, and a read of its log with a wrong token.
func loadStep(ctx context.Context, operator, anon *remote.Client, base string, i int) error {
	seed := uint64(i)
	info, err := operator.Create(ctx, remote.CreateRequest{Env: "sealedbid", Seed: &seed, Agents: []string{"scripted"}})
	if err != nil {
		return fmt.Errorf("step %d: create: %w", i, err)
	}
	if _, err := operator.Episode(ctx, info.ID); err != nil {
		return fmt.Errorf("step %d: read: %w", i, err)
	}
	pub, err := anon.Episode(ctx, info.ID)
	if err != nil {
		return fmt.Errorf("step %d: read without a token: %w", i, err)
	}
	if pub.Outcome != nil || pub.Seed != nil {
		return fmt.Errorf("step %d: a caller without a token read the outcome or seed", i)
	}
	var se *remote.StatusError
	if _, err := anon.Events(ctx, info.ID, 0, "0123456789abcdef0123456789abcdef", 0, 0); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		return fmt.Errorf("step %d: events with a wrong token: got %v, want HTTP 401", i, err)
	}
	return nil
}

// TestServedReply: --reply-from takes a run's reply settings (context
// included), and the reply flags given override them.
func TestServedReply(t *testing.T) {
	dir := t.TempDir()
	o := loop.Options{}.Defaults()
	o.Rollout.MaxLegal, o.Rollout.Trace, o.Rollout.Context, o.Rollout.MaxTokens = -1, "tom", 640, 48
	b, err := yaml.Marshal(&o)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, runfiles.ConfigFile), b, 0o644)
	for _, tt := range []struct {
		args                []string
		maxTokens, maxLegal int
		trace               string
		context             int
	}{
		{nil, 48, -1, "tom", 640},
		{[]string{"--max-tokens", "7", "--context", "1024"}, 7, -1, "tom", 1024},
		{[]string{"--trace", "none"}, 48, -1, "none", 640},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		ctxLen := fs.Int("context", 2048, "")
		rf := cliflag.NewOptionFlags(fs, web.SeatOptions{}.Defaults().Reply)
		rf.Int("max-tokens", "", func(r *selfplay.Reply) *int { return &r.MaxTokens })
		rf.String("trace", "", func(r *selfplay.Reply) *string { return &r.Trace })
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		r := web.SeatOptions{}.Defaults().Reply
		if err := servedReply(fs, rf, dir, &r, ctxLen); err != nil {
			t.Fatal(err)
		}
		if r.MaxTokens != tt.maxTokens || r.MaxLegal != tt.maxLegal || r.Trace != tt.trace || *ctxLen != tt.context {
			t.Errorf("%v: max_tokens %d, max_legal %d, trace %q, context %d; want %d, %d, %q, %d", tt.args,
				r.MaxTokens, r.MaxLegal, r.Trace, *ctxLen, tt.maxTokens, tt.maxLegal, tt.trace, tt.context)
		}
	}
}
