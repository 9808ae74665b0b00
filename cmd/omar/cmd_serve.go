package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/proxy"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/web"
)

func init() {
	register(command{name: "serve", summary: "serve episodes to remote agents over HTTP", run: runServe})
}

// serveSecretEnv names the environment variable with the server's secret.
const serveSecretEnv = "OMAR_SERVE_SECRET"

// policyKeyEnv names the environment variable with the proxy's API key.
const policyKeyEnv = "OMAR_POLICY_KEY"

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "serve")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (loopback by default; other addresses expose the server)")
	def := remote.ServerOptions{}.Defaults()
	maxBody := fs.Int64("max-body", def.MaxBodyBytes, "largest request body in bytes")
	actionTimeout := fs.Duration("action-timeout", def.ActionTimeout, "time a remote seat has to answer a notification before the default applies")
	maxWait := fs.Duration("max-wait", def.MaxWait, "longest long-poll")
	retries := fs.Int("max-retries", def.MaxRetries, "retries after an invalid action")
	perClient := fs.Int("max-per-client", def.MaxPerClient, "running episodes one client address may create")
	secret := fs.String("secret", "", "bearer token that creates and lists episodes (default: $"+serveSecretEnv+", else a random one printed at start)")
	so := web.ServeOptions{Seat: web.SeatOptions{}.Defaults(), Find: envs.Find}
	fs.StringVar(&so.Records, "records", "", "episode records (JSONL) the web page replays")
	fs.BoolVar(&so.Save, "save", false, "append the record of every episode that ends on this server (those played on the web page included) to the --records file, created when absent")
	fs.StringVar(&so.RunDir, "run", "", "run directory whose metrics.jsonl and episodes.jsonl the dashboard charts")
	fs.StringVar(&so.Model, "model", "", "base model (GGUF) of the base and adapter: players")
	playerList := fs.String("players", "", "model players seats can be given to (base, adapter:PATH, model:PATH, ollama:NAME; default base with --model); the first is also \"model\"")
	fs.StringVar(&so.Backend.LlamaLib, "llama-lib", llamaLibEnv(), "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)")
	fs.IntVar(&so.Backend.Threads, "threads", 2, "CPU threads of the llama backends")
	fs.IntVar(&so.Slots, "slots", 8, "model sequences decoded together per backend")
	fs.IntVar(&so.Context, "context", 2048, "tokens per model seat (prompt and reply)")
	replyFrom, rf := bindServedReply(fs, so.Seat.Reply)
	fs.StringVar(&so.Backend.OllamaHost, "ollama", os.Getenv("OLLAMA_HOST"), "Ollama server of ollama: players (default $OLLAMA_HOST, else Ollama's default)")
	policy := fs.String("policy", "", "policy model (GGUF) also served on OpenAI-compatible /v1/chat/completions and /v1/completions; calls are recorded for training (docs/proxy.md)")
	policyAdapter := fs.String("policy-adapter", "", "LoRA adapter of --policy")
	policyKey := fs.String("policy-key", "", "bearer token the proxy's completion calls need (default: $"+policyKeyEnv+", else none: open to whoever reaches the server)")
	var po proxy.PolicyOptions // forwarding to a teacher; its key is $OMAR_FORWARD_KEY (a flag would show in ps)
	fs.StringVar(&po.Forward, "policy-forward", "", "with --policy: answer chat calls by this OpenAI-compatible endpoint (a teacher), recorded with the policy's template and tokenizer (docs/proxy.md)")
	fs.StringVar(&po.ForwardModel, "policy-forward-model", "", "the model name sent to --policy-forward")
	ho := bindHTTP(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cliflag.Usagef("unexpected arguments %q", fs.Args())
	}
	if err := servedReply(fs, rf, *replyFrom, &so.Seat.Reply, &so.Context); err != nil {
		return err
	}
	// A served seat's prompt budget is the backend's per-seat context.
	so.Seat.Context = so.Context
	if *secret == "" {
		*secret = os.Getenv(serveSecretEnv)
	}
	given := *secret != ""
	so.API = remote.ServerOptions{MaxBodyBytes: *maxBody, MaxWait: *maxWait, ActionTimeout: *actionTimeout, MaxRetries: *retries,
		MaxEpisodes: def.MaxEpisodes, MaxPerClient: *perClient, Secret: *secret, Catalog: envs.All()}
	if *playerList == "" && so.Model != "" {
		*playerList = players.KindBase
	}
	var err error
	if so.Players, err = players.ParseList(*playerList); err != nil {
		return cliflag.Usage(err)
	}
	if err := so.Validate(); err != nil {
		return cliflag.Usage(err)
	}
	so.ModelParams = loop.BuiltinParamsByGame(so.Model, so.API.Catalog)
	if err := checkHTTP(env, ho, so.API.MaxWait); err != nil {
		return err
	}
	so.SaveError = func(err error) { fmt.Fprintf(env.stderr, "omar serve: %v\n", err) }
	srv, closeModels, err := web.Serve(ctx, so)
	if err != nil {
		return err
	}
	defer closeModels.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(env.stderr, "warning: listening on %s, which is not a loopback address\n", ln.Addr())
	}
	web.WriteBanner(env.stdout, ln.Addr().String(), srv.Secret(), given, serveSecretEnv)
	var handler http.Handler = srv
	if *policy != "" {
		if *policyKey == "" {
			*policyKey = os.Getenv(policyKeyEnv)
		}
		po.Model, po.Adapter, po.Backend, po.Slots, po.Context = *policy, *policyAdapter, so.Backend, so.Slots, so.Context
		po.MaxTokens, po.APIKey, po.ForwardKey = so.Seat.MaxTokens, *policyKey, os.Getenv("OMAR_FORWARD_KEY")
		h, closer, err := proxy.Mount(po, "http://"+ln.Addr().String(), srv.Secret(), srv, env.stdout)
		if err != nil {
			return err
		}
		defer closer.Close()
		handler = h
	}
	return web.ServeUntil(ctx, ln, handler, *ho)
}

// servedReply sets how served model seats reply: the reply settings of
// the run in dir (its rollout; "" none), then the reply flags given. The
// run's context becomes the seats' unless --context was given.
func servedReply(fs *flag.FlagSet, rf *cliflag.OptionFlags[selfplay.Reply], dir string, reply *selfplay.Reply, context *int) error {
	if dir != "" {
		run, err := loop.ReadConfig(dir)
		if err != nil {
			return err
		}
		*reply = run.Rollout.Reply
		if !cliflag.Given(fs, "context") {
			*context = run.Rollout.Context
		}
	}
	return rf.Apply(reply)
}

// bindHTTP binds the flags of the HTTP server's timeouts and connection
// cap.
func bindHTTP(fs *flag.FlagSet) *web.HTTPOptions {
	ho := web.HTTPOptions{}.Defaults()
	fs.DurationVar(&ho.ReadHeaderTimeout, "read-header-timeout", ho.ReadHeaderTimeout, "time a client has to send a request's headers")
	fs.DurationVar(&ho.ReadTimeout, "read-timeout", ho.ReadTimeout, "time a client has to send a whole request, body included")
	fs.DurationVar(&ho.WriteTimeout, "write-timeout", ho.WriteTimeout, "time a response may take from its request's headers (above --max-wait and the longest proxy call; 0 none)")
	fs.DurationVar(&ho.IdleTimeout, "idle-timeout", ho.IdleTimeout, "an idle keep-alive connection is closed after this")
	fs.IntVar(&ho.MaxConns, "max-conns", ho.MaxConns, "open connections at most (beyond: 503); lowered to fit the open-file limit")
	return &ho
}

// bindServedReply binds --reply-from and the flags of served model seats'
// reply settings (def: without flags).
func bindServedReply(fs *flag.FlagSet, def selfplay.Reply) (*string, *cliflag.OptionFlags[selfplay.Reply]) {
	from := fs.String("reply-from", "", "run directory whose reply settings (its config.yaml's rollout: max_tokens, max_legal, trace, chat_template, thinking, sampling) served model seats use, so they play as the policy trained; the flags below override it")
	rf := cliflag.NewOptionFlags(fs, def)
	rf.Int("max-tokens", "longest model reply in tokens", func(r *selfplay.Reply) *int { return &r.MaxTokens })
	rf.Int("max-legal", "list a notification's legal replies in the prompt when it has at most this many (0: the default, 8; -1: never): the policy's training setting, rollout.max_legal", func(r *selfplay.Reply) *int { return &r.MaxLegal })
	rf.String("trace", "reply trace of model seats: tom, or none (the policy's training setting, rollout.trace)", func(r *selfplay.Reply) *string { return &r.Trace })
	rf.String("thinking", "a reasoning model's reply mode: off, on or budget N (the policy's training setting, rollout.thinking)", func(r *selfplay.Reply) *string { return &r.Thinking })
	rf.String("chat-template", "chat template overriding the model's: a Jinja template inline, or a file (rollout.chat_template)", func(r *selfplay.Reply) *string { return &r.ChatTemplate })
	rf.Float32("temperature", "sampling temperature of model seats (0: greedy)", func(r *selfplay.Reply) *float32 { return &r.Temperature })
	return from, rf
}

// checkHTTP checks the HTTP options against the long-poll and lowers the
// connection cap to what the open-file limit allows.
func checkHTTP(env *cliEnv, ho *web.HTTPOptions, maxWait time.Duration) error {
	if ho.WriteTimeout > 0 && ho.WriteTimeout <= maxWait {
		return cliflag.Usagef("--write-timeout %v must exceed --max-wait %v, or every long-poll would be cut", ho.WriteTimeout, maxWait)
	}
	if err := ho.Validate(); err != nil {
		return cliflag.Usage(err)
	}
	if was := ho.FitOpenFiles(); was > 0 {
		fmt.Fprintf(env.stderr, "omar serve: --max-conns %d lowered to %d to fit the open-file limit\n", was, ho.MaxConns)
	}
	return nil
}
