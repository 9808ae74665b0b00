package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/engine/remote"
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
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "secret of 3 bytes") {
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
		if err := runServe(context.Background(), &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, append([]string{"--addr", "127.0.0.1:0"}, args...)); !errors.Is(err, errUsage) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}
