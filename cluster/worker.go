package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/selfplay"
)

// WorkerOptions configure a rollout worker.
type WorkerOptions struct {
	// URL is the NATS server; Name the run's cluster.name.
	URL, Name string
	// ID names the worker in results and logs (default: host-pid).
	ID string
	// Model is this machine's copy of the run's model; it must have the
	// run's SHA-256. Empty: the model is downloaded from the run's bucket
	// into Cache once.
	Model string
	// Cache holds downloaded models and adapters (default: the user's
	// cache directory, omar/cluster).
	Cache string
	// Threads overrides rollout.threads; LlamaLib the llama.cpp library
	// directory of the run's config (this machine's may differ).
	Threads  int
	LlamaLib string
	// GPULayers, when not nil, overrides rollout.gpu_layers (a worker
	// with a GPU in a run configured for CPUs, or the other way round).
	GPULayers *int
	// Log receives a line per work item and the waits.
	Log io.Writer
	// trustModel skips the digest check (an in-process worker plays the
	// learner's own file); quiet leaves out the line per work item (an
	// in-process worker would draw through the learner's progress bar).
	trustModel, quiet bool
}

// worker is a running worker's state: the run it last played and what is
// loaded for it.
type worker struct {
	o      WorkerOptions
	n      names
	js     jetstream.JetStream
	obs    jetstream.ObjectStore
	info   runInfo
	remote *loop.Remote
	// adapter is the object the policy samples with ("": none).
	adapter string
}

// Work runs a worker until ctx is done: it pulls work items, plays them
// and publishes their episodes. It waits for a learner when there is none
// yet, and follows a learner that restarts.
func Work(ctx context.Context, o WorkerOptions) error {
	if o.ID == "" {
		host, _ := os.Hostname()
		o.ID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		o.Cache = filepath.Join(dir, "omar", "cluster")
	}
	if !loop.ValidClusterName(o.Name) {
		return fmt.Errorf("worker: --name %q: want 1–32 letters, digits, - or _", o.Name)
	}
	nc, err := nats.Connect(o.URL, nats.Name("omar worker "+o.ID), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	if err != nil {
		return fmt.Errorf("worker: connect to %s: %w", o.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	w := &worker{o: o, n: namesFor(o.Name), js: js}
	defer func() {
		if w.remote != nil {
			w.remote.Close()
		}
	}()
	var cons jetstream.Consumer
	waiting := false
	for ctx.Err() == nil {
		if cons == nil {
			if cons, err = js.Consumer(ctx, w.n.workStream, w.n.workers); err != nil {
				if !waiting {
					fmt.Fprintf(o.Log, "worker %s: waiting for the learner of %s on %s\n", o.ID, o.Name, o.URL)
					waiting = true
				}
				cons = nil
				sleep(ctx, time.Second)
				continue
			}
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			// The stream or consumer went away (a learner restarting):
			// bind again.
			cons = nil
			sleep(ctx, time.Second)
			continue
		}
		waiting = false
		if err := w.handle(ctx, msg, cons.CachedInfo().Config.AckWait); err != nil {
			if ctx.Err() != nil {
				// Shutting down: give the work straight back.
				msg.Nak()
				return nil
			}
			// The server went away mid-item (results not published, or
			// the item not acknowledged): the item is redelivered, to
			// this worker or another, once the server is back.
			fmt.Fprintf(o.Log, "worker %s: %v (the work item goes back to the queue)\n", o.ID, err)
			msg.Nak()
			sleep(ctx, time.Second)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// handle plays one work item. It returns the errors of talking to the
// server; a work item it cannot play is reported to the learner as a
// result with Error.
func (w *worker) handle(ctx context.Context, msg jetstream.Msg, ackWait time.Duration) error {
	var it workItem
	if err := json.Unmarshal(msg.Data(), &it); err != nil {
		msg.Term()
		fmt.Fprintf(w.o.Log, "worker %s: dropped an unreadable work item: %v\n", w.o.ID, err)
		return nil
	}
	// Tell the server the item is in hand while it is played, so that
	// ack_wait bounds how long a dead worker holds it, not how long an
	// episode takes.
	hb, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(max(ackWait/3, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-hb.Done():
				return
			case <-t.C:
				msg.InProgress()
			}
		}
	}()
	results, err := w.play(ctx, &it)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, errStale) {
		return msg.Term()
	}
	if err != nil {
		fmt.Fprintf(w.o.Log, "worker %s: episodes %d–%d: %v\n", w.o.ID, it.First, it.First+it.N-1, err)
		results = []result{{Incarnation: it.Incarnation, Episode: it.First, Worker: w.o.ID, Error: fmt.Sprintf("episodes %d–%d: %v", it.First, it.First+it.N-1, err)}}
	}
	for i := range results {
		b, err := json.Marshal(&results[i])
		if err != nil {
			return err
		}
		id := msgID(it.Incarnation, results[i].Episode, results[i].Adapter)
		if results[i].Error != "" {
			id += "/error"
		}
		_, err = w.js.Publish(ctx, w.n.results, b, jetstream.WithMsgID(id))
		if errors.Is(err, nats.ErrMaxPayload) && results[i].Error == "" {
			// The learner must hear of it, or it waits for the episode
			// forever.
			results = append(results[:i+1], result{Incarnation: it.Incarnation, Episode: results[i].Episode, Worker: w.o.ID,
				Error: fmt.Sprintf("episode %d's result is %d bytes, more than the server's max_payload of %d: raise max_payload on the NATS server (or play shorter episodes)", results[i].Episode, len(b), w.js.Conn().MaxPayload())})
			continue
		}
		if err != nil {
			return fmt.Errorf("worker: publish episode %d: %w", results[i].Episode, err)
		}
	}
	stop()
	return msg.DoubleAck(ctx)
}

// errStale marks a work item of an incarnation that is not the run's
// current one.
var errStale = errors.New("stale work item")

// play plays a work item's episodes.
func (w *worker) play(ctx context.Context, it *workItem) ([]result, error) {
	if err := w.bind(ctx, it.Incarnation); err != nil {
		return nil, err
	}
	if it.AdapterObject != w.adapter {
		path := ""
		if it.AdapterObject != "" {
			var err error
			if path, err = w.fetch(ctx, it.AdapterObject); err != nil {
				return nil, err
			}
		}
		if err := w.remote.SetAdapter(ctx, path); err != nil {
			return nil, err
		}
		w.adapter = it.AdapterObject
	}
	for _, name := range it.Snapshots {
		path, err := w.fetch(ctx, snapshotObject(name))
		if err != nil {
			return nil, err
		}
		if err := w.remote.LoadSnapshot(ctx, name, path); err != nil {
			return nil, err
		}
	}
	cast := map[int]map[int]string{}
	for k, c := range it.Cast {
		i, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("cast key %q", k)
		}
		cast[i] = c
	}
	if !w.o.quiet {
		fmt.Fprintf(w.o.Log, "worker %s: playing episodes %d–%d (iteration %d, adapter %d)\n", w.o.ID, it.First, it.First+it.N-1, it.Iteration, it.Adapter)
	}
	var out []result
	st, err := w.remote.Play(ctx, it.First, it.N, cast, func(res *selfplay.EpisodeResult) error {
		rec, err := json.Marshal(res.Record)
		if err != nil {
			return err
		}
		out = append(out, result{Incarnation: it.Incarnation, Episode: res.Index, Adapter: it.Adapter, Worker: w.o.ID,
			Record: rec, Trajectories: res.Trajectories, WallNS: int64(res.Wall)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		out[len(out)-1].Stats = &st
	}
	return out, nil
}

// bind makes sure the worker is set up for the run incarnation inc: it
// reads run.json and (re)opens the run's model when the run changed.
func (w *worker) bind(ctx context.Context, inc string) error {
	if w.info.Incarnation == inc && w.remote != nil {
		return nil
	}
	obs, err := w.js.ObjectStore(ctx, w.n.bucket)
	if err != nil {
		return fmt.Errorf("run bucket: %w", err)
	}
	b, err := obs.GetBytes(ctx, infoObject)
	if err != nil {
		return fmt.Errorf("run.json: %w", err)
	}
	var info runInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("run.json: %w", err)
	}
	if info.Incarnation != inc {
		return errStale
	}
	w.obs = obs
	same := w.remote != nil && bytes.Equal(info.Config, w.info.Config) && info.ModelSHA256 == w.info.ModelSHA256 &&
		info.Label == w.info.Label && info.Context == w.info.Context
	w.info = info
	if same {
		// The same run resumed: the backend stays, the snapshots (whose
		// names are iterations of the same deterministic run) too.
		return nil
	}
	if w.remote != nil {
		w.remote.Close()
		w.remote, w.adapter = nil, ""
	}
	o := loop.Options{}.Defaults()
	if err := strictyaml.Decode(bytes.NewReader(info.Config), &o); err != nil {
		return fmt.Errorf("the run's config: %w", err)
	}
	if w.o.Threads > 0 {
		o.Rollout.Threads = w.o.Threads
	}
	if w.o.LlamaLib != "" {
		o.Rollout.LlamaLib = w.o.LlamaLib
	}
	if w.o.GPULayers != nil {
		o.Rollout.GPULayers = *w.o.GPULayers
	}
	model, err := w.model(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w.o.Log, "worker %s: playing run %s (%s, %s)\n", w.o.ID, w.o.Name, o.Rollout.Env, filepath.Base(model))
	w.remote, err = loop.OpenRemote(o, model, info.Label, info.Context)
	return err
}

// model returns this machine's file of the run's model.
func (w *worker) model(ctx context.Context) (string, error) {
	sum := w.info.ModelSHA256
	if w.o.Model != "" {
		if w.o.trustModel {
			return w.o.Model, nil
		}
		have, _, err := fileSHA256(w.o.Model)
		if err != nil {
			return "", err
		}
		if have != sum {
			return "", fmt.Errorf("--model %s is not the run's model (sha256 %s, the run's %s)", w.o.Model, have[:12], sum[:12])
		}
		return w.o.Model, nil
	}
	path := filepath.Join(w.o.Cache, "models", sum+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	fmt.Fprintf(w.o.Log, "worker %s: downloading the run's model (%d bytes)\n", w.o.ID, w.info.ModelBytes)
	if err := w.download(ctx, modelObject, path); err != nil {
		return "", err
	}
	if have, _, err := fileSHA256(path); err != nil || have != sum {
		os.Remove(path)
		return "", fmt.Errorf("the downloaded model does not have the run's sha256 %s", sum[:12])
	}
	return path, nil
}

// fetch returns the local file of an adapter object of the current
// incarnation, downloading it once.
func (w *worker) fetch(ctx context.Context, name string) (string, error) {
	path := filepath.Join(w.o.Cache, w.o.Name, w.info.Incarnation, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return path, w.download(ctx, name, path)
}

// download writes object name to path (through a temporary file, so a
// killed worker leaves no half file under the final name).
func (w *worker) download(ctx context.Context, name, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".part*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	if err := w.obs.GetFile(ctx, name, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("download %s: %w", name, err)
	}
	return os.Rename(tmp, path)
}
