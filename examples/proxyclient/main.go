// Command proxyclient is an external agent that omar trains: it plays a
// seat of an engine episode over the engine's HTTP API and asks an
// OpenAI-compatible endpoint (omar serve --policy) for every move, as an
// agent written in any framework would. The only omar-specific part of
// its model calls is three headers naming its episode, seat and seat
// token, which let the proxy give the seat's reward to the calls.
//
//	omar serve --policy model.gguf --secret "$SECRET" &
//	go run ./examples/proxyclient -server http://127.0.0.1:8080 -secret "$SECRET" -env craigslist_v1
//
// When the episode ends the proxy turns each seat's calls into a
// trajectory (GET /v1/omar/trajectories with the secret).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
)

// options are the command's flags.
type options struct {
	server, proxy, secret, apiKey string
	env, model                    string
	seed                          int64
	agents                        string
	maxTokens                     int
	temperature                   float64
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "http://127.0.0.1:8080", "omar serve's address (the engine API)")
	flag.StringVar(&o.proxy, "proxy", "", "the OpenAI-compatible endpoint (default: -server)")
	flag.StringVar(&o.secret, "secret", os.Getenv("OMAR_SERVE_SECRET"), "the engine server's secret, to create the episode")
	flag.StringVar(&o.apiKey, "api-key", "", "the proxy's API key, if it has one")
	flag.StringVar(&o.env, "env", "craigslist_v1", "environment id")
	flag.StringVar(&o.model, "model", "omar", "model name sent to the endpoint")
	flag.Int64Var(&o.seed, "seed", -1, "episode seed (-1: the server draws one)")
	flag.StringVar(&o.agents, "agents", "remote", "comma-separated agent per seat: remote (played here) or scripted[:NAME]")
	flag.IntVar(&o.maxTokens, "max-tokens", 64, "longest reply")
	flag.Float64Var(&o.temperature, "temperature", 1, "sampling temperature")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "proxyclient:", err)
		os.Exit(1)
	}
}

// run creates an episode, plays its remote seats concurrently and prints
// the outcome.
func run(ctx context.Context, o options, out io.Writer) error {
	if o.proxy == "" {
		o.proxy = o.server
	}
	engineAPI := &remote.Client{BaseURL: o.server, Secret: o.secret}
	req := remote.CreateRequest{Env: o.env, Agents: strings.Split(o.agents, ",")}
	if o.seed >= 0 {
		s := uint64(o.seed)
		req.Seed = &s
	}
	info, err := engineAPI.Create(ctx, req)
	if err != nil {
		return fmt.Errorf("create episode: %w", err)
	}
	fmt.Fprintf(out, "episode %s of %s\n", info.ID, info.Env)
	var wg sync.WaitGroup
	errs := make([]error, len(info.Seats))
	for i, si := range info.Seats {
		if si.Agent != "remote" {
			continue
		}
		a := &chatAgent{opts: o, episode: info.ID, seat: si}
		seat := &remote.Seat{Client: &remote.Client{BaseURL: o.server}, Episode: info.ID, Info: si, Agent: a}
		wg.Go(func() { errs[i] = seat.Run(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	final, err := engineAPI.Episode(ctx, info.ID)
	if err != nil {
		return err
	}
	if final.Outcome == nil {
		return fmt.Errorf("episode %s ended %s: %s", info.ID, final.Status, final.Error)
	}
	fmt.Fprintf(out, "outcome: %s, rewards %v\n", final.Outcome.Result, final.Outcome.Rewards)
	return nil
}

// chatAgent plays one seat: its history is a chat (a system prompt, then
// what it saw and what it answered), sent whole with every call, as
// chat-completion clients do; the proxy recognises the history as its
// own stream and appends only the new turn.
type chatAgent struct {
	opts    options
	episode string
	seat    remote.SeatInfo
	history []message
	seen    int
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Act answers a notification with the model's reply.
func (a *chatAgent) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	if a.history == nil {
		a.history = []message{{Role: "system", Content: "You play " + a.seat.Name + ". Answer every question with your move only."}}
	}
	var news []string
	for _, ev := range t.View[a.seen:] {
		if ev.Text != "" && ev.Kind != engine.KindNotification {
			news = append(news, ev.Text)
		}
	}
	a.seen = len(t.View)
	news = append(news, t.Notification.Text)
	a.history = append(a.history, message{Role: "user", Content: strings.Join(news, "\n")})
	reply, err := a.complete(ctx, t.Notification.Grammar)
	if err != nil {
		return engine.Action{}, err
	}
	a.history = append(a.history, message{Role: "assistant", Content: reply})
	return engine.Action{NotificationID: t.Notification.ID, Text: reply}, nil
}

// complete is one chat completion call.
func (a *chatAgent) complete(ctx context.Context, grammar string) (string, error) {
	body := map[string]any{
		"model": a.opts.model, "messages": a.history, "max_tokens": a.opts.maxTokens, "temperature": a.opts.temperature,
	}
	if grammar != "" {
		// llama.cpp's extension: the reply follows the move syntax.
		body["grammar"] = grammar
	}
	data, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.opts.proxy, "/")+"/v1/chat/completions", bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.opts.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.opts.apiKey)
	}
	req.Header.Set("X-Omar-Episode", a.episode)
	req.Header.Set("X-Omar-Seat", strconv.Itoa(a.seat.Index))
	req.Header.Set("X-Omar-Seat-Token", a.seat.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", err
	}
	var answer struct {
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return "", fmt.Errorf("chat completion: HTTP %d: %s", resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK || len(answer.Choices) != 1 {
		msg := string(raw)
		if answer.Error != nil {
			msg = answer.Error.Message
		}
		return "", fmt.Errorf("chat completion: HTTP %d: %s", resp.StatusCode, msg)
	}
	return answer.Choices[0].Message.Content, nil
}
