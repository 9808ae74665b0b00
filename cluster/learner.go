package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// MaxPayload is the embedded server's largest message (a result holds an
// episode's token streams).
const MaxPayload = 8 << 20

// Learner is a run's side of the cluster: it publishes the run's work
// and collects its episodes (a loop.EpisodeSource).
type Learner struct {
	o   loop.ClusterOptions
	run *loop.Run
	n   names
	log io.Writer
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	obs jetstream.ObjectStore
	res jetstream.Consumer
	inc string
	url string
	// uploaded are the objects of this incarnation in the bucket.
	uploaded map[string]bool
	// early holds results of episodes not collected yet (work published
	// ahead); next is the first episode not yet collected (a result below
	// it is a redelivered duplicate).
	early         map[int]*result
	next          int
	duplicates    int
	lastFetchNote time.Time

	stopWorkers context.CancelFunc
	workers     sync.WaitGroup
	workerErrs  chan error
}

// Attach connects run to its cluster (starting the embedded server and
// the in-process workers its cluster section asks for) and makes it the
// run's episode source. Progress notes (the server's URL, waiting for
// workers) go to log. Close the learner after the run.
func Attach(ctx context.Context, run *loop.Run, log io.Writer) (_ *Learner, err error) {
	o := run.Options()
	if log == nil {
		log = io.Discard
	}
	l := &Learner{o: o.Cluster, run: run, n: namesFor(o.Cluster.Name), log: log, uploaded: map[string]bool{}, early: map[int]*result{}, workerErrs: make(chan error, 64)}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	l.url = l.o.URL
	if l.url == "" {
		if l.srv, err = startServer(l.o.Listen, run.Path(runfiles.ClusterStoreDir)); err != nil {
			return nil, err
		}
		l.url = l.srv.ClientURL()
		fmt.Fprintf(log, "cluster: embedded NATS server at %s (workers: omar worker --nats %s --name %s)\n", l.url, l.url, l.o.Name)
	}
	if l.nc, err = nats.Connect(l.url, nats.Name("omar learner "+l.o.Name), nats.MaxReconnects(-1)); err != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", l.url, err)
	}
	if l.js, err = jetstream.New(l.nc); err != nil {
		return nil, err
	}
	if err := l.setup(ctx, o); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	run.SetEpisodeSource(l)
	l.next = run.State().Cursor
	if l.o.Workers > 0 {
		wctx, cancel := context.WithCancel(context.Background())
		l.stopWorkers = cancel
		threads := o.Rollout.Threads
		for i := range l.o.Workers {
			l.workers.Add(1)
			go func() {
				defer l.workers.Done()
				err := Work(wctx, WorkerOptions{
					URL: l.url, Name: l.o.Name, ID: "local-" + strconv.Itoa(i),
					Model: o.Rollout.Model, trustModel: true, quiet: true, Threads: threads, Log: log,
					Cache: run.Path(runfiles.ClusterCacheDir),
				})
				if err != nil && wctx.Err() == nil {
					l.workerErrs <- fmt.Errorf("in-process worker %d: %w", i, err)
				}
			}()
		}
	}
	return l, nil
}

// URL is the NATS server the learner uses.
func (l *Learner) URL() string { return l.url }

// Duplicates counts results dropped because their episode had been
// collected already (redelivered work).
func (l *Learner) Duplicates() int { return l.duplicates }

// startServer starts an embedded NATS server with JetStream, storing in
// dir, listening on listen (host:port, port 0 picks a free one).
func startServer(listen, dir string) (*server.Server, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("cluster.listen %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, fmt.Errorf("cluster.listen %q: bad port", listen)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "omar", Host: host, Port: p, JetStream: true, StoreDir: dir,
		MaxPayload: MaxPayload, NoSigs: true, NoLog: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("cluster: the embedded server did not start on %s", listen)
	}
	return srv, nil
}

// setup creates (or empties) the run's streams and bucket and publishes
// run.json under a new incarnation.
func (l *Learner) setup(ctx context.Context, o loop.Options) error {
	var b [8]byte
	rand.Read(b[:])
	l.inc = hex.EncodeToString(b[:])
	ws, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: l.n.workStream, Subjects: []string{l.n.work}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("work stream: %w", err)
	}
	rs, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: l.n.resStream, Subjects: []string{l.n.results}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("results stream: %w", err)
	}
	// A resumed (or restarted) run publishes its work again from its
	// cursor: what an earlier learner left is stale.
	if err := ws.Purge(ctx); err != nil {
		return err
	}
	if err := rs.Purge(ctx); err != nil {
		return err
	}
	if _, err := l.js.CreateOrUpdateConsumer(ctx, l.n.workStream, jetstream.ConsumerConfig{
		Durable: l.n.workers, AckPolicy: jetstream.AckExplicitPolicy, AckWait: l.o.AckWaitDuration(),
		MaxDeliver: -1, MaxAckPending: 4096,
	}); err != nil {
		return fmt.Errorf("work consumer: %w", err)
	}
	if l.res, err = l.js.CreateOrUpdateConsumer(ctx, l.n.resStream, jetstream.ConsumerConfig{
		Durable: l.n.learner, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1, MaxAckPending: -1,
	}); err != nil {
		return fmt.Errorf("results consumer: %w", err)
	}
	if l.obs, err = l.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: l.n.bucket, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	sum, size, err := fileSHA256(o.Rollout.Model)
	if err != nil {
		return err
	}
	// Adapters and snapshots of an earlier incarnation may belong to
	// another run of the same name; the model is kept when it is the same.
	old, err := l.obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return err
	}
	haveModel := false
	for _, info := range old {
		if info.Name == modelObject && info.Headers.Get("Omar-Sha256") == sum {
			haveModel = true
			continue
		}
		if err := l.obs.Delete(ctx, info.Name); err != nil {
			return err
		}
	}
	if !haveModel {
		f, err := os.Open(o.Rollout.Model)
		if err != nil {
			return err
		}
		_, err = l.obs.Put(ctx, jetstream.ObjectMeta{Name: modelObject, Headers: nats.Header{"Omar-Sha256": []string{sum}}}, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("upload the model: %w", err)
		}
	}
	config, err := os.ReadFile(l.run.Path(runfiles.ConfigFile))
	if err != nil {
		return err
	}
	label, seatContext := l.run.RemoteInfo()
	info, err := json.Marshal(runInfo{Incarnation: l.inc, Config: config, ModelSHA256: sum, ModelBytes: size, Label: label, Context: seatContext})
	if err != nil {
		return err
	}
	_, err = l.obs.PutBytes(ctx, infoObject, info)
	return err
}

// upload puts the file at path into the bucket as name, once.
func (l *Learner) upload(ctx context.Context, name, path string) error {
	if l.uploaded[name] {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := l.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, f); err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	l.uploaded[name] = true
	return nil
}

// Publish stores w's adapter and snapshots in the bucket and its
// episodes as work items of cluster.chunk episodes.
func (l *Learner) Publish(ctx context.Context, w loop.Work) error {
	item := workItem{Incarnation: l.inc, Iteration: w.Iteration, Adapter: w.Adapter}
	if w.AdapterPath != "" {
		item.AdapterObject = adapterObject(w.Adapter)
		if err := l.upload(ctx, item.AdapterObject, w.AdapterPath); err != nil {
			return err
		}
	}
	for first := w.First; first < w.First+w.N; first += l.o.Chunk {
		it := item
		it.First, it.N = first, min(l.o.Chunk, w.First+w.N-first)
		need := map[string]bool{}
		for i := it.First; i < it.First+it.N; i++ {
			c := w.Cast[i]
			if c == nil {
				continue
			}
			if it.Cast == nil {
				it.Cast = map[string]map[int]string{}
			}
			it.Cast[strconv.Itoa(i)] = c
			for _, agent := range c {
				if name, ok := snapshotAgent(agent); ok {
					need[name] = true
				}
			}
		}
		for _, name := range engine.SortedKeys(need) {
			path, ok := w.Snapshots[name]
			if !ok {
				return fmt.Errorf("episode cast names snapshot %s, which the run does not have", name)
			}
			if err := l.upload(ctx, snapshotObject(name), path); err != nil {
				return err
			}
			it.Snapshots = append(it.Snapshots, name)
		}
		b, err := json.Marshal(it)
		if err != nil {
			return err
		}
		if _, err := l.js.Publish(ctx, l.n.work, b, jetstream.WithMsgID(l.inc+"/work/"+strconv.Itoa(it.First))); err != nil {
			return err
		}
	}
	return nil
}

// snapshotAgent returns the snapshot a league agent value names.
func snapshotAgent(agent string) (string, bool) {
	const prefix = "league:"
	if len(agent) <= len(prefix) || agent[:len(prefix)] != prefix || agent == prefix+"base" {
		return "", false
	}
	return agent[len(prefix):], true
}

// waitNote is how long Collect waits for a result before it says so.
const waitNote = 30 * time.Second

// Collect yields episodes first … first+n−1 as their results arrive, in
// episode order.
func (l *Learner) Collect(ctx context.Context, first, n, minAdapter int, yield func(*loop.Episode) error) (selfplay.Stats, error) {
	start := time.Now()
	var st selfplay.Stats
	if l.next != first {
		// A run asks for its episodes in order; anything else is a bug
		// in the caller, not a cluster condition.
		return st, fmt.Errorf("cluster: asked for episodes from %d, next is %d", first, l.next)
	}
	lastNews := time.Now()
	for l.next < first+n {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if r, ok := l.early[l.next]; ok {
			delete(l.early, l.next)
			if r.Adapter < minAdapter {
				return st, fmt.Errorf("episode %d played with the adapter of iteration %d, older than %d", r.Episode, r.Adapter, minAdapter)
			}
			ep, err := r.episode()
			if err != nil {
				return st, err
			}
			if r.Stats != nil {
				addStats(&st, r.Stats)
			}
			l.next++
			if err := yield(ep); err != nil {
				return st, err
			}
			lastNews = time.Now()
			continue
		}
		select {
		case err := <-l.workerErrs:
			return st, err
		default:
		}
		// What has arrived, without waiting for a full batch: a result
		// is yielded as soon as its turn comes.
		batch, err := l.res.FetchNoWait(64)
		if err != nil {
			// The server restarting, the connection reconnecting: the
			// results wait in the stream.
			l.transient(ctx, err)
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			var r result
			err := json.Unmarshal(msg.Data(), &r)
			if aerr := msg.Ack(); aerr != nil && err == nil {
				err = aerr
			}
			if err != nil {
				// Not a worker's result (workers publish what they
				// marshalled): a stray publisher must not stop the run.
				fmt.Fprintf(l.log, "cluster: dropped a result message: %v\n", err)
				continue
			}
			if r.Incarnation != l.inc {
				continue
			}
			if r.Error != "" {
				return st, fmt.Errorf("cluster: worker %s: %s", r.Worker, r.Error)
			}
			if _, dup := l.early[r.Episode]; dup || r.Episode < l.next {
				l.duplicates++
				continue
			}
			l.early[r.Episode] = &r
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			l.transient(ctx, err)
		}
		if got == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		if got == 0 && time.Since(lastNews) > waitNote {
			fmt.Fprintf(l.log, "cluster: waiting for episode %d (%d of %d collected); is a worker running? omar worker --nats %s --name %s\n",
				l.next, l.next-first, n, l.url, l.o.Name)
			lastNews = time.Now()
		}
	}
	st.Episodes, st.Wall = n, time.Since(start)
	return st, nil
}

// transient notes a failed fetch (at most every waitNote) and waits a
// second before the next.
func (l *Learner) transient(ctx context.Context, err error) {
	if time.Since(l.lastFetchNote) > waitNote {
		fmt.Fprintf(l.log, "cluster: fetch results: %v (retrying)\n", err)
		l.lastFetchNote = time.Now()
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
}

func addStats(st *selfplay.Stats, s *selfplay.Stats) {
	st.Turns += s.Turns
	st.PromptTokens += s.PromptTokens
	st.GeneratedTokens += s.GeneratedTokens
	st.ReusedTokens += s.ReusedTokens
	st.Calls += s.Calls
	st.Requests += s.Requests
	st.Segments += s.Segments
	st.Breaks += s.Breaks
	st.UnmatchedTurnRewards += s.UnmatchedTurnRewards
}

// episode decodes a result into the loop's form.
func (r *result) episode() (*loop.Episode, error) {
	var rec engine.Record
	if err := json.Unmarshal(r.Record, &rec); err != nil {
		return nil, fmt.Errorf("cluster: episode %d: record: %w", r.Episode, err)
	}
	return &loop.Episode{
		EpisodeResult: &selfplay.EpisodeResult{Index: r.Episode, Record: &rec, Trajectories: r.Trajectories, Wall: time.Duration(r.WallNS)},
		RecordJSON:    r.Record,
		Adapter:       r.Adapter,
	}, nil
}

// Close stops the in-process workers, the connection and the embedded
// server.
func (l *Learner) Close() error {
	if l.stopWorkers != nil {
		l.stopWorkers()
		l.workers.Wait()
		l.stopWorkers = nil
	}
	if l.nc != nil {
		l.nc.Close()
		l.nc = nil
	}
	if l.srv != nil {
		l.srv.Shutdown()
		l.srv.WaitForShutdown()
		l.srv = nil
	}
	return nil
}

// fileSHA256 returns the hex SHA-256 and the size of the file at path.
func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
