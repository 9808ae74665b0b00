package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/selfplay"
)

// ServeOptions are what omar serve puts together: the API server, the
// model players that can take seats, the records to replay and the run
// to chart.
type ServeOptions struct {
	API remote.ServerOptions
	// Find resolves an environment id for new episodes.
	Find func(id string) (engine.Game, error)
	// Records is an episode-records file for the replay page ("" none).
	Records string
	// RunDir is a run directory for the dashboard ("" none).
	RunDir string
	// Players are the model players seats can be given to, as arena
	// specs: base, adapter:PATH, model:PATH, ollama:NAME (scripted
	// policies are always there).
	Players []arena.Spec
	// Model is the base model (GGUF) of base and adapter: players.
	Model string
	// LlamaLib, Threads, Slots and Context set up the llama backends: the
	// library directory, CPU threads, sequence slots (model seats decoded
	// together; more seats share them, least recently used first) and
	// tokens per sequence.
	LlamaLib string
	Threads  int
	Slots    int
	Context  int
	// OllamaHost serves ollama: players ("" the default host).
	OllamaHost string
	Seat       SeatOptions
}

// Validate checks o.
func (o ServeOptions) Validate() error {
	var errs []error
	if o.Find == nil {
		errs = append(errs, errors.New("no environment finder"))
	}
	if err := o.API.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(o.Players) > 0 {
		if o.Slots < 1 || o.Context < 1 {
			errs = append(errs, fmt.Errorf("slots %d and context %d: want both ≥ 1 for model players", o.Slots, o.Context))
		}
		if err := o.Seat.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.RunDir != "" {
		if st, err := os.Stat(o.RunDir); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("run directory %q is not a directory", o.RunDir))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("web: serve: %w", err)
	}
	return nil
}

// Serve builds omar serve's site: the API server of o.API with the model
// players of o.Players loaded (and seated by name), the records indexed
// and the run followed. Close the returned closer when done: it releases
// the model backends.
func Serve(ctx context.Context, o ServeOptions) (*Site, io.Closer, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	site := Options{}
	if o.Records != "" {
		rs, err := OpenRecords(o.Records)
		if err != nil {
			return nil, nil, err
		}
		site.Records = rs
	}
	if o.RunDir != "" {
		site.Run = NewRunFeed(o.RunDir)
	}
	closer := io.Closer(nopCloser{})
	if len(o.Players) > 0 {
		lo := llama.Options{}.Defaults()
		if o.LlamaLib != "" {
			lo.LibDir = o.LlamaLib
		}
		if o.Threads > 0 {
			lo.Threads, lo.ThreadsBatch = o.Threads, o.Threads
		}
		lineup, err := arena.Open(ctx, o.Players, nil, arena.OpenOptions{
			Model: o.Model, Llama: lo, Slots: o.Slots, Context: o.Context,
			Ollama: ollama.Options{Host: o.OllamaHost, Parallel: o.Slots},
		})
		if err != nil {
			return nil, nil, err
		}
		var names []string
		var players []*selfplay.Player
		for _, p := range lineup.Players {
			if p.Model == nil {
				lineup.Close()
				return nil, nil, fmt.Errorf("web: serve: %s is a scripted policy, which every seat can have already: name model players only", p.Name)
			}
			names, players = append(names, p.Name), append(players, p.Model)
		}
		agents, err := NewModelAgents(names, players, o.Seat)
		if err != nil {
			lineup.Close()
			return nil, nil, err
		}
		o.API.Agents = agents
		closer = lineup
	}
	api, err := remote.NewServer(ctx, o.Find, o.API)
	if err != nil {
		closer.Close()
		return nil, nil, err
	}
	site.API = api
	s, err := New(site)
	if err != nil {
		closer.Close()
		return nil, nil, err
	}
	return s, closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
