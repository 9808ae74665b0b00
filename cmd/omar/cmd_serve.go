package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
)

func init() {
	register(command{name: "serve", summary: "serve episodes to remote agents over HTTP", run: runServe})
}

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "serve")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (loopback by default; other addresses expose the server)")
	def := remote.ServerOptions{}.Defaults()
	maxBody := fs.Int64("max-body", def.MaxBodyBytes, "largest request body in bytes")
	actionTimeout := fs.Duration("action-timeout", def.ActionTimeout, "time a remote seat has to answer a notification before the default applies")
	maxWait := fs.Duration("max-wait", def.MaxWait, "longest long-poll")
	retries := fs.Int("max-retries", def.MaxRetries, "retries after an invalid action")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := remote.ServerOptions{MaxBodyBytes: *maxBody, MaxWait: *maxWait, ActionTimeout: *actionTimeout, MaxRetries: *retries, MaxEpisodes: def.MaxEpisodes}
	srv, err := remote.NewServer(ctx, func(id string) (engine.Game, error) { return findGame(id) }, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(env.stderr, "warning: listening on %s, which is not a loopback address\n", ln.Addr())
	}
	fmt.Fprintf(env.stdout, "omar serve: listening on http://%s (POST /v1/episodes; GET /v1/episodes/{id}/events; POST /v1/episodes/{id}/actions)\n", ln.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
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
