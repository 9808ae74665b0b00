package proxy

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/players"
)

// PolicyOptions are the settings of a proxy served with its own policy
// model (omar serve --policy).
type PolicyOptions struct {
	Model, Adapter string
	// Backend opens the policy's llama backend (library, threads, …).
	Backend            players.Backend
	Slots              int
	Context, MaxTokens int
	// APIKey, when set, is the bearer token every completion call needs
	// (Options.APIKey); empty: completions are open to whoever reaches
	// the server.
	APIKey string
	// Forward, ForwardKey and ForwardModel send chat calls to another
	// OpenAI-compatible endpoint (Options.Forward); the policy's template
	// and tokenizer record them, and completions calls still use it.
	Forward, ForwardKey, ForwardModel string
}

// policyServer is the rollout proxy and the backend it generates with.
type policyServer struct {
	backend *llama.Backend
	proxy   *Proxy
}

// Close stops the proxy's episode watchers, then frees the model.
func (s *policyServer) Close() error {
	s.proxy.Close()
	return s.backend.Close()
}

// Mount loads the policy model and returns a handler that serves the
// proxy's routes (/v1/chat/completions, /v1/completions, /v1/models,
// /v1/omar/…) and passes every other request to next (the engine API).
// The proxy reaches the engine through engineURL with the server's secret,
// which also guards the proxy's management API.
func Mount(o PolicyOptions, engineURL, secret string, next http.Handler, log io.Writer) (http.Handler, io.Closer, error) {
	def := llama.Options{}.Defaults()
	slots, context := cmp.Or(o.Slots, def.Parallel), cmp.Or(o.Context, def.Context)
	b, err := o.Backend.OpenLlama(o.Model, o.Adapter, slots, context, "")
	if err != nil {
		return nil, nil, err
	}
	po := Options{}.Defaults()
	po.Model = o.Model
	po.Vocab = b.Model().Vocab().NTokens()
	if o.MaxTokens > 0 {
		po.MaxTokens = o.MaxTokens
	}
	// No prompt longer than a sequence's context can be decoded: refuse it
	// before tokenising more.
	po.MaxPromptTokens = context
	po.APIKey = o.APIKey
	po.Secret = secret
	po.Poll = time.Second
	po.Games = envs.Find
	po.Forward, po.ForwardKey, po.ForwardModel = o.Forward, o.ForwardKey, o.ForwardModel
	p, err := New(b, b, &remote.Client{BaseURL: engineURL, Secret: secret}, po)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	mux := http.NewServeMux()
	for _, route := range []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/omar/"} {
		mux.Handle(route, p)
	}
	mux.Handle("/", next)
	fmt.Fprintf(log, "omar serve: policy %s on /v1/chat/completions and /v1/completions (sessions: X-Omar-Session or user; seats: X-Omar-Episode, X-Omar-Seat, X-Omar-Seat-Token)\n", o.Model)
	if o.Forward != "" {
		fmt.Fprintf(log, "omar serve: chat calls forwarded to %s, recorded in %s's tokens for imitation (not PPO)\n", o.Forward, o.Model)
	}
	return mux, &policyServer{backend: b, proxy: p}, nil
}
