package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/players"
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
	// Save appends the record of every episode that ends on this server
	// (those played on the page included) to Records, created when
	// absent; the replay page lists them as they end.
	Save bool
	// SaveError hears a record that could not be saved (nil: dropped);
	// the episode is not failed for it.
	SaveError func(error)
	// RunDir is a run directory for the dashboard ("" none).
	RunDir string
	// Players are the model players seats can be given to: base,
	// adapter:PATH, model:PATH, ollama:NAME (scripted policies are always
	// there).
	Players []players.Spec
	// Model is the base model (GGUF) of base and adapter: players.
	Model string
	// Backend opens the players' backends (library, threads, Ollama
	// host, …).
	Backend players.Backend
	// Slots and Context size the llama backends: sequence slots (model
	// seats decoded together; more seats share them, least recently used
	// first) and tokens per sequence.
	Slots   int
	Context int
	Seat    SeatOptions
	// ModelParams are the parameters the model players play each
	// environment with (Options.ModelParams): the page's form starts from
	// them.
	ModelParams map[string]engine.Params
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
	if o.Save && o.Records == "" {
		errs = append(errs, errors.New("saving episodes needs the records file to append them to"))
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
	site := Options{ModelParams: o.ModelParams}
	if o.Records != "" {
		if o.Save {
			if err := touch(o.Records); err != nil {
				return nil, nil, err
			}
		}
		rs, err := OpenRecords(o.Records)
		if err != nil {
			return nil, nil, err
		}
		site.Records = rs
		if o.Save {
			o.API.Finished = func(rec *engine.Record) {
				if err := rs.Append(rec); err != nil && o.SaveError != nil {
					o.SaveError(err)
				}
			}
		}
	}
	if o.RunDir != "" {
		site.Run = NewRunFeed(o.RunDir)
	}
	closer := io.Closer(nopCloser{})
	if len(o.Players) > 0 {
		agents, lineup, err := openPlayers(ctx, o)
		if err != nil {
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

// openPlayers loads o.Players with the seat's reply settings: the
// chat_template override renders their prompts as it rendered them in
// training.
func openPlayers(ctx context.Context, o ServeOptions) (*ModelAgents, *players.Lineup, error) {
	tmpl, err := o.Seat.ChatTemplateSource()
	if err != nil {
		return nil, nil, err
	}
	lineup, err := players.Open(ctx, o.Players, nil, players.OpenOptions{
		Backend: o.Backend, Model: o.Model, Slots: o.Slots, Context: o.Context, ChatTemplate: tmpl,
	})
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var models []*selfplay.Player
	for _, p := range lineup.Players {
		if err := servable(p, o.Seat); err != nil {
			lineup.Close()
			return nil, nil, err
		}
		names, models = append(names, p.Name), append(models, p.Model)
	}
	agents, err := NewModelAgents(names, models, o.Seat)
	if err != nil {
		lineup.Close()
		return nil, nil, err
	}
	return agents, lineup, nil
}

// servable checks that p can take served seats with the reply settings:
// thinking needs a chat template the Jinja engine renders, as in a run.
func servable(p players.Player, seat SeatOptions) error {
	if p.Model == nil {
		return fmt.Errorf("web: serve: %s is a scripted policy, which every seat can have already: name model players only", p.Name)
	}
	if b, ok := p.Model.Tokenizer.(*llama.Backend); ok && seat.Thinking != "" && !b.ChatTemplateJinja() {
		return fmt.Errorf("web: serve: thinking %q: %s's chat template is not rendered by the Jinja engine (%s), which thinking needs; set chat_template", seat.Thinking, p.Name, b.ChatTemplateSource())
	}
	return nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// touch creates the file at path when it is absent.
func touch(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	return f.Close()
}
