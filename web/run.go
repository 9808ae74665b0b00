package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/runfiles"
)

// RunStatus is what a live run reports between iterations.
type RunStatus struct {
	// Live is true while a run in this process feeds the dashboard (omar
	// selfplay --ui); false when a finished or foreign run directory is
	// read (omar serve --run).
	Live      bool   `json:"live"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase,omitempty"`
	Episodes  int    `json:"episodes"`
	Total     int    `json:"total"`
	// Iterations is the run's planned number of iterations (0 unknown).
	Iterations int       `json:"iterations"`
	Updated    time.Time `json:"updated"`
}

// RunFeed is the dashboard's data: a run directory's metrics.jsonl and
// episodes.jsonl, read when asked for (so a run that another process
// writes shows its new lines), and the live status a run in this process
// reports through the methods below, which the caller calls from the
// run's hooks (package web reads a run; it does not link the trainer).
type RunFeed struct {
	dir string

	mu     sync.Mutex
	status RunStatus
}

// NewRunFeed reads the run directory dir.
func NewRunFeed(dir string) *RunFeed { return &RunFeed{dir: dir} }

// Start marks the feed live: a run in this process, of iterations
// planned iterations, reports to it from now on.
func (f *RunFeed) Start(iterations int) {
	f.update(func(s *RunStatus) { s.Live, s.Iterations = true, iterations })
}

// Phase reports that iteration it entered a phase (a run's Phase hook).
func (f *RunFeed) Phase(it int, name string) {
	f.update(func(s *RunStatus) { s.Iteration, s.Phase = it, name })
}

// Episode reports the rollout's finished episodes (a run's Episode hook).
func (f *RunFeed) Episode(it, done, total int) {
	f.update(func(s *RunStatus) { s.Iteration, s.Episodes, s.Total = it, done, total })
}

// Iteration reports that an iteration completed with its metrics line m
// written (a run's Iteration hook).
func (f *RunFeed) Iteration(m *runfiles.Metrics) {
	f.update(func(s *RunStatus) { s.Iteration, s.Phase = m.Iteration, "done" })
}

func (f *RunFeed) update(change func(*RunStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.status)
	f.status.Updated = time.Now().UTC()
}

// RunPage is the answer of GET /v1/run.
type RunPage struct {
	Dir    string    `json:"dir"`
	Status RunStatus `json:"status"`
	// Metrics are metrics.jsonl's lines after the request's iteration
	// cursor, as written (fields the dashboard does not know, such as a
	// held-out evaluation's, are kept).
	Metrics []json.RawMessage `json:"metrics"`
	// Episodes are the last episode records of episodes.jsonl.
	Episodes []json.RawMessage `json:"episodes"`
	// Evals are the run's held-out evaluations (eval.jsonl), all of
	// them: the metrics lines carry those after an iteration, not the one
	// before the first, where the held-out line starts.
	Evals []EvalPoint `json:"evals"`
	// Bad names the metrics lines that are not a JSON object with an
	// iteration (FILE:LINE: why), left out so that the others still chart.
	Bad []string `json:"bad,omitempty"`
}

// EvalPoint is one held-out evaluation of a run: the policy's mean reward
// over every pairing and per side, at iteration (0: before the first).
type EvalPoint struct {
	Iteration int                `json:"iteration"`
	Mean      float64            `json:"mean"`
	Reward    map[string]float64 `json:"reward"`
	// Lo and Hi bound Mean's 95% interval, from the pairings' own
	// intervals; absent when the line has none.
	Lo *float64 `json:"lo,omitempty"`
	Hi *float64 `json:"hi,omitempty"`
}

// The most a dashboard request reads.
const (
	maxDashboardEpisodes = 10
	maxDashboardEvals    = 10000
	maxEpisodesTail      = 16 << 20
)

// Page reads the lines of metrics.jsonl whose iteration is above after,
// and the last episodes records.
func (f *RunFeed) Page(after, episodes int) (RunPage, error) {
	f.mu.Lock()
	p := RunPage{Dir: f.dir, Status: f.status, Metrics: []json.RawMessage{}, Episodes: []json.RawMessage{}, Evals: []EvalPoint{}}
	f.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(f.dir, runfiles.MetricsFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return p, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1] // a line being written is not whole yet
	} else {
		b = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	lastIt := 0
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var it struct {
			Iteration *int `json:"iteration"`
		}
		if err := json.Unmarshal(raw, &it); err != nil || it.Iteration == nil {
			why := "no iteration"
			if err != nil {
				why = err.Error()
			}
			if len(p.Bad) < maxBadLines {
				p.Bad = append(p.Bad, fmt.Sprintf("%s:%d: %s", runfiles.MetricsFile, line, why))
			}
			continue
		}
		lastIt = max(lastIt, *it.Iteration)
		if *it.Iteration > after {
			p.Metrics = append(p.Metrics, json.RawMessage(bytes.Clone(raw)))
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if p.Evals, err = readEvals(filepath.Join(f.dir, runfiles.EvalFile)); err != nil {
		return p, err
	}
	lines, err := tailLines(filepath.Join(f.dir, runfiles.EpisodesFile), min(max(episodes, 0), maxDashboardEpisodes), maxEpisodesTail)
	if err != nil {
		return p, err
	}
	for _, l := range lines {
		if json.Valid(l) {
			p.Episodes = append(p.Episodes, json.RawMessage(l))
		}
	}
	if !p.Status.Live {
		// A finished run's iteration is its last line's, also when the
		// cursor is past every line (a refresh after the first page).
		p.Status.Iteration = lastIt
	}
	return p, nil
}

// Dashboard is a training dashboard served while a run trains.
type Dashboard struct {
	// URL opens the dashboard; its fragment holds the secret.
	URL    string
	server *http.Server
	errc   chan error
}

// ServeDashboard serves feed's dashboard on addr (loopback by default in
// omar selfplay --ui) and listens until Close; a live run reports to the
// feed from its hooks (RunFeed.Start, Phase, Episode, Iteration). The
// dashboard needs secret, as episodes show every seat's private
// information; "" draws one, which URL carries (a given one it does not).
func ServeDashboard(feed *RunFeed, addr, secret string) (*Dashboard, error) {
	site, err := New(Options{Secret: secret, Run: feed})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web: dashboard: %w", err)
	}
	// The dashboard's requests are short: a minute bounds every response.
	ho := HTTPOptions{}.Defaults()
	ho.WriteTimeout = time.Minute
	d := &Dashboard{URL: "http://" + ln.Addr().String() + "/ui/dashboard", errc: make(chan error, 1),
		server: NewHTTPServer(site, ho)}
	if secret == "" {
		// A drawn secret must be shown or nobody could open the page; a
		// chosen one is not echoed (it may end up in a log).
		d.URL += "#secret=" + site.Secret()
	}
	go func() { d.errc <- d.server.Serve(Listener(ln, ho)) }()
	return d, nil
}

// Close stops serving.
func (d *Dashboard) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := d.server.Shutdown(ctx)
	if serr := <-d.errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

var _ io.Closer = (*Dashboard)(nil)

// readEvals reads eval.jsonl's evaluations (none when it is missing), at
// most maxDashboardEvals of them from its last maxEpisodesTail bytes; a
// line being written is left out.
func readEvals(path string) ([]EvalPoint, error) {
	out := []EvalPoint{}
	lines, err := tailLines(path, maxDashboardEvals, maxEpisodesTail)
	if err != nil {
		return out, err
	}
	for _, l := range lines {
		var e EvalPoint
		if json.Unmarshal(l, &e) == nil {
			e.interval(l)
			out = append(out, e)
		}
	}
	return out, nil
}
