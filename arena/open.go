package arena

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
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/selfplay"
)

// OpenOptions say how Open loads the model players of specs.
type OpenOptions struct {
	// Model is the base model (GGUF) of "base" and "adapter:" players.
	Model string
	// Llama is the template of every llama backend (library directory,
	// threads, KV cache type, GPU layers, batch); Open sets the model, the
	// sequence slots (Slots) and the context per sequence (Context).
	Llama   llama.Options
	Slots   int
	Context int
	// AdapterScale scales every "adapter:" player's LoRA.
	AdapterScale float32
	// Ollama is the template of "ollama:" backends (host, parallel
	// requests); Open sets the model.
	Ollama ollama.Options
}

// Lineup is the players and opponents Open made, with the backends they
// share.
type Lineup struct {
	Players, Opponents []Player
	// Llama holds one backend per model file (for its counters).
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
// lists is one player.
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
					return nil, fmt.Errorf("arena: player %s: %w", s, err)
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
	case SpecScripted:
		return ScriptedPlayer(s.Arg), nil
	case SpecOllama:
		oo := o.Ollama
		oo.Model = s.Arg
		b, err := ollama.New(oo)
		if err != nil {
			return p, err
		}
		l.closers = append(l.closers, b)
		p.Version = s.Arg
		p.Model = &selfplay.Player{Label: p.Name, Backend: b}
		return p, nil
	}
	path := o.Model
	if s.Kind == SpecModel {
		path = s.Arg
	}
	if path == "" {
		return p, errors.New("no base model (pass the model file)")
	}
	b, err := l.llama(path, o)
	if err != nil {
		return p, err
	}
	if p.Version, err = fileVersion(path); err != nil {
		return p, err
	}
	p.Model = &selfplay.Player{Label: p.Name, Backend: b, Tokenizer: b, Adapter: inference.AdapterBase}
	if s.Kind == SpecAdapter {
		av, err := fileVersion(s.Arg)
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
	lo := o.Llama
	lo.Model = path
	lo.Adapter = ""
	lo.Parallel = max(1, o.Slots)
	lo.Contexts = min(lo.Contexts, lo.Parallel)
	lo.Context = o.Context
	lo.Batch = max(lo.Batch, lo.Parallel)
	b, err := llama.New(lo)
	if err != nil {
		return nil, err
	}
	l.Llama[abs] = b
	l.closers = append(l.closers, b)
	return b, nil
}

// fileVersion identifies a model or adapter file by its contents: the
// SHA-256 of files up to hashLimit, else size and modification time (a
// large base model is not rewritten in place by training, and hashing it
// would cost seconds per gigabyte at every start).
func fileVersion(path string) (string, error) {
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

// SeqSlots is the number of llama sequence slots that hold every model
// seat of Parallel episodes of the largest game of o.
func (o Options) SeqSlots() (int, error) {
	es, err := o.resolve()
	if err != nil {
		return 0, err
	}
	seats := 1
	for _, e := range es {
		s, err := e.game.Seats(e.params)
		if err != nil {
			return 0, err
		}
		seats = max(seats, len(s))
	}
	return o.Parallel * seats, nil
}
