package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/judge"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/sotopia"
)

// Players are the backends of a rollout: the policy (and a frozen
// opponent) and whatever else was opened for it (a judge).
type Players struct {
	Policy, Frozen *selfplay.Player
	// Named are the further players the agents name (base, adapter:,
	// model: and ollama: seats), by agent value.
	Named map[string]*selfplay.Player
	// Llama is the policy's backend (adapter swaps, stats); nil when every
	// seat is scripted.
	Llama   *llama.Backend
	closers []io.Closer
}

// Close releases every backend.
func (p *Players) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c.Close())
	}
	p.closers = nil
	return errors.Join(errs...)
}

// LlamaOptions are the llama backend options for one model file with the
// rollout's backend settings and chat template.
func (c *RolloutOptions) LlamaOptions(path, adapter string, parallel, context int) (llama.Options, error) {
	tmpl, err := c.ChatTemplateSource()
	if err != nil {
		return llama.Options{}, err
	}
	return c.Backend.Llama(path, adapter, parallel, context, tmpl)
}

func (c *RolloutOptions) openLlama(path, adapter string, parallel, context int) (*llama.Backend, error) {
	o, err := c.LlamaOptions(path, adapter, parallel, context)
	if err != nil {
		return nil, err
	}
	return players.OpenLlamaOptions(o)
}

// OpenPlayers loads the policy (and frozen) models the options name and
// every other player the agents name (players.Open); seatsPerEpisode
// sizes the llama context's sequence slots.
func OpenPlayers(c *RolloutOptions, seatsPerEpisode int) (*Players, error) {
	p := &Players{}
	open := func(path, adapter string) (*llama.Backend, error) {
		b, err := c.openLlama(path, adapter, c.Parallel*seatsPerEpisode, c.Context)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, b)
		return b, nil
	}
	if c.Model != "" {
		b, err := open(c.Model, c.Adapter)
		if err != nil {
			p.Close()
			return nil, err
		}
		if c.Thinking != "" && !b.ChatTemplateJinja() {
			p.Close()
			return nil, fmt.Errorf("thinking %q: %s's chat template is not rendered by the Jinja engine (%s), which thinking needs; set chat_template", c.Thinking, filepath.Base(c.Model), b.ChatTemplateSource())
		}
		p.Llama = b
		p.Policy = &selfplay.Player{Label: "llama:" + filepath.Base(c.Model), Backend: b, Tokenizer: b}
	}
	if c.FrozenModel != "" {
		b, err := open(c.FrozenModel, "")
		if err != nil {
			p.Close()
			return nil, err
		}
		p.Frozen = &selfplay.Player{Label: "frozen:" + filepath.Base(c.FrozenModel), Backend: b, Tokenizer: b}
	}
	if err := p.openNamed(c, seatsPerEpisode); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// openNamed opens the players the agents name besides the policy, the
// frozen model and the scripts: they play (Ollama models at the message
// level), and are never trained.
func (p *Players) openNamed(c *RolloutOptions, seatsPerEpisode int) error {
	var agents []string
	var specs []players.Spec
	for _, agent := range engine.SortedKeys(invert(c.Agents)) {
		s, err := players.Parse(agent)
		if err != nil {
			return fmt.Errorf("agents: %w", err)
		}
		if s.Kind == players.KindPolicy || s.Kind == players.KindFrozen || s.Kind == players.KindScripted {
			continue
		}
		agents, specs = append(agents, agent), append(specs, s)
	}
	if len(specs) == 0 {
		return nil
	}
	tmpl, err := c.ChatTemplateSource()
	if err != nil {
		return err
	}
	l, err := players.Open(context.Background(), specs, nil, players.OpenOptions{Backend: c.Backend, Model: c.Model,
		Slots: c.Parallel * seatsPerEpisode, Context: c.Context, ChatTemplate: tmpl, Requests: max(1, c.Parallel)})
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	p.closers = append(p.closers, l)
	p.Named = map[string]*selfplay.Player{}
	for i, agent := range agents {
		p.Named[agent] = l.Players[i].Model
	}
	return nil
}

// invert returns the set of m's values.
func invert(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}

// OpenJudge returns a completer for the judge jc names, its label and
// what to close when done (nil when it opened nothing). parallel sizes its batch. policyBackend, when
// not nil, serves judge: {policy: true} (a rollout, where nothing is
// trained); otherwise such a judge loads policyModel again without an
// adapter.
func (c *RolloutOptions) OpenJudge(jc JudgeOptions, parallel int, policyBackend *llama.Backend, policyModel string) (*judge.Completer, string, io.Closer, error) {
	switch {
	case jc.OllamaModel != "":
		// The judge's own ollama: host, not the rollout's ollama_host.
		comp, b, err := judge.NewOllama(players.Backend{OllamaHost: jc.Ollama}.Ollama(jc.OllamaModel, parallel))
		if err != nil {
			return nil, "", nil, fmt.Errorf("judge: %w", err)
		}
		return comp, "ollama:" + jc.OllamaModel, b, nil
	case jc.Policy && policyBackend != nil:
		return judge.New(policyBackend), "policy:" + filepath.Base(policyModel), nil, nil
	}
	path, label := jc.Model, "llama:"+filepath.Base(jc.Model)
	if jc.Policy {
		if policyModel == "" {
			return nil, "", nil, errors.New("judge: policy: true needs a policy model (model)")
		}
		path, label = policyModel, "policy-base:"+filepath.Base(policyModel)
	}
	ctx := jc.Context
	if ctx == 0 {
		ctx = DefaultJudgeContext
	}
	// The chat_template override is the policy's; a judge model of its
	// own renders with its own template.
	jo := *c
	if path != policyModel {
		jo.ChatTemplate = ""
	}
	b, err := jo.openLlama(path, "", parallel, ctx)
	if err != nil {
		return nil, "", nil, fmt.Errorf("judge: %w", err)
	}
	return judge.New(b), label, b, nil
}

// ErrNoJudge refuses a training run on SOTOPIA without a judge: every
// episode would be unjudged with reward 0, and PPO would step on nothing.
var ErrNoJudge = errors.New("sotopia: a training run needs a judge (without one every reward is 0); " +
	"give the rollout section's judge one of: model: JUDGE.gguf (a GGUF on a backend of its own), " +
	"ollama_model: NAME (an Ollama model, with ollama: URL), or policy: true (the policy's model without the adapter) — " +
	"e.g. omar selfplay --env sotopia --set rollout.judge.policy=true")

// AttachJudge gives g the LLM judge the options name (SOTOPIA; other
// environments take none). trainPolicy says the policy is being trained:
// then judge: {policy: true} loads the policy's model file again without
// the adapter instead of sharing its backend.
func AttachJudge(g engine.Game, c *RolloutOptions, p *Players, trainPolicy bool) (engine.Game, error) {
	jc, err := c.JudgeOptions()
	if err != nil {
		return g, err
	}
	if jc == nil {
		if sg, ok := g.(*sotopia.Game); ok && trainPolicy && !sg.Judged() {
			return nil, ErrNoJudge
		}
		return g, nil
	}
	sg, ok := g.(*sotopia.Game)
	if !ok {
		return nil, fmt.Errorf("judge: %s takes no judge", g.ID())
	}
	var shared *llama.Backend
	if !trainPolicy {
		shared = p.Llama
		if jc.Policy && shared == nil {
			return nil, errors.New("judge: policy: true needs a policy model (model)")
		}
	}
	comp, label, closer, err := c.OpenJudge(*jc, c.Parallel, shared, c.Model)
	if err != nil {
		return nil, err
	}
	if closer != nil {
		p.closers = append(p.closers, closer)
	}
	o := sotopia.JudgeOptions{}.Defaults()
	o.Label, o.Process, o.Extra = label, jc.Process, jc.Extra
	if jc.StageWeights != "" {
		o.StageWeights = jc.StageWeights
	}
	j, err := sotopia.NewJudge(comp, o)
	if err != nil {
		return nil, err
	}
	return sg.WithJudge(j), nil
}
