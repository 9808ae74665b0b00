package players

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/selfplay"
)

// OpenOptions say how Open loads the model players of specs.
type OpenOptions struct {
	// Backend opens every backend (library, threads, KV cache, GPU
	// layers, Ollama host).
	Backend Backend
	// Model is the base model (GGUF) of base and adapter: players.
	Model string
	// Slots is the llama sequence slots per model file and Context the
	// tokens per sequence.
	Slots   int
	Context int
	// Requests bounds an Ollama player's requests in flight (0: Slots).
	Requests int
	// ChatTemplate, when set, renders the players' prompts instead of
	// their models' own templates (the reply settings' chat_template).
	ChatTemplate string
	// AdapterScale scales every adapter: player's LoRA (0: 1).
	AdapterScale float32
}

// Lineup is the players Open made, with the backends they share.
type Lineup struct {
	// Players and Opponents are Open's two lists, in order.
	Players, Opponents []Player
	// Llama holds one backend per model file (for its counters), by
	// absolute path.
	Llama   map[string]*llama.Backend
	closers []io.Closer
}

// Close releases every backend.
func (l *Lineup) Close() error {
	var errs []error
	for _, c := range l.closers {
		errs = append(errs, c.Close())
	}
	l.closers = nil
	return errors.Join(errs...)
}

// Open loads the backends that players and opponents need: one llama
// backend per model file, shared by the base model and all its adapters
// (each registered under its own name, so their seats still decode
// together), and one Ollama client per Ollama model. A spec named in both
// lists is one player. Open knows no training run: policy and frozen are
// a run's to open.
func Open(ctx context.Context, players, opponents []Spec, o OpenOptions) (*Lineup, error) {
	l := &Lineup{Llama: map[string]*llama.Backend{}}
	made := map[string]Player{}
	open := func(specs []Spec) ([]Player, error) {
		var out []Player
		for _, s := range specs {
			p, ok := made[s.String()]
			if !ok {
				var err error
				if p, err = l.open(ctx, s, o); err != nil {
					return nil, fmt.Errorf("player %s: %w", s, err)
				}
				made[s.String()] = p
			}
			out = append(out, p)
		}
		return out, nil
	}
	var err error
	if l.Players, err = open(players); err == nil {
		l.Opponents, err = open(opponents)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lineup) open(ctx context.Context, s Spec, o OpenOptions) (Player, error) {
	p := Player{Name: s.String(), Kind: s.Kind}
	switch s.Kind {
	case KindScripted:
		return Scripted(s.Arg), nil
	case KindPolicy, KindFrozen:
		return p, fmt.Errorf("%s plays only in a training run", s.Kind)
	case KindOllama:
		n := o.Requests
		if n == 0 {
			n = o.Slots
		}
		b, err := o.Backend.OpenOllama(s.Arg, n)
		if err != nil {
			return p, err
		}
		l.closers = append(l.closers, b)
		p.Version = s.Arg
		p.Model = &selfplay.Player{Label: p.Name, Backend: b}
		return p, nil
	}
	path := o.Model
	if s.Kind == KindModel {
		path = s.Arg
	}
	if path == "" {
		return p, errors.New("no base model (pass the model file)")
	}
	b, err := l.llama(path, o)
	if err != nil {
		return p, err
	}
	if p.Version, err = FileVersion(path); err != nil {
		return p, err
	}
	p.Model = &selfplay.Player{Label: p.Name, Backend: b, Tokenizer: b, Adapter: inference.AdapterBase}
	if s.Kind == KindAdapter {
		av, err := FileVersion(s.Arg)
		if err != nil {
			return p, err
		}
		scale := o.AdapterScale
		if scale == 0 {
			scale = 1
		}
		name := "arena/" + s.Arg
		if err := b.LoadAdapter(ctx, name, s.Arg, scale); err != nil {
			return p, err
		}
		p.Version += "+" + av
		p.Model.Adapter = name
	}
	return p, nil
}

// llama returns the backend of the model file path, opening it once.
func (l *Lineup) llama(path string, o OpenOptions) (*llama.Backend, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if b := l.Llama[abs]; b != nil {
		return b, nil
	}
	b, err := o.Backend.OpenLlama(path, "", o.Slots, o.Context, o.ChatTemplate)
	if err != nil {
		return nil, err
	}
	l.Llama[abs] = b
	l.closers = append(l.closers, b)
	return b, nil
}

// FileVersion identifies a model or adapter file by its contents: the
// SHA-256 of files up to hashLimit, else size and modification time (a
// large base model is not rewritten in place by training, and hashing it
// would cost seconds per gigabyte at every start).
func FileVersion(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Size() > hashLimit {
		return fmt.Sprintf("size%d-mtime%d", st.Size(), st.ModTime().UnixNano()), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

const hashLimit = 1 << 30

// WriteCost reports the episodes played, the wall time and how full the
// llama backends' decode steps were.
func (l *Lineup) WriteCost(w io.Writer, played int, wallSeconds float64) {
	fmt.Fprintf(w, "played %d episodes in %.1f s\n", played, wallSeconds)
	for path, b := range l.Llama {
		st := b.Stats()
		if st.Steps == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: %d decode steps, %.1f sequences sampled per step, %d adapter switches, %d tokens generated, decode %.1f s\n",
			path, st.Steps, float64(st.GeneratedTokens)/float64(st.Steps), b.AdapterSwitches(), st.GeneratedTokens, st.DecodeTime.Seconds())
	}
}
