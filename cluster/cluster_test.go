package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// TestMain doubles as a rollout worker process: the tests start the test
// binary again with OMAR_CLUSTER_TEST_WORKER set, so workers are real
// processes that can be killed.
func TestMain(m *testing.M) {
	if url := os.Getenv("OMAR_CLUSTER_TEST_WORKER"); url != "" {
		os.Exit(testWorker(url))
	}
	os.Exit(m.Run())
}

// testWorker runs a worker process until SIGTERM and returns its exit
// status.
func testWorker(url string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if path := os.Getenv("OMAR_CLUSTER_TEST_CPUPROFILE"); path != "" {
		// A worker's CPU profile (go tool pprof), written when it stops.
		f, err := os.Create(path + "." + os.Getenv("OMAR_CLUSTER_TEST_ID"))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	err := Work(ctx, WorkerOptions{URL: url, Name: os.Getenv("OMAR_CLUSTER_TEST_NAME"), ID: os.Getenv("OMAR_CLUSTER_TEST_ID"),
		Cache: os.Getenv("OMAR_CLUSTER_TEST_CACHE"), Log: os.Stderr})
	if err != nil {
		os.Stderr.WriteString("worker: " + err.Error() + "\n")
		return 1
	}
	return 0
}

// tinyOptions is a short league run on the tiny generated model: a
// sealed-bid auction, 8 episodes an iteration, snapshots every iteration
// (so work items carry casts and snapshot adapters).
func tinyOptions(t *testing.T, dir string, iterations int) loop.Options {
	t.Helper()
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("the llama.cpp libraries are not installed (make deps)")
	}
	path := filepath.Join(dir, "tiny.gguf")
	if _, err := os.Stat(path); err != nil {
		if err := model.WriteFile(path, model.Options{Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	o := loop.Options{}.Defaults()
	o.Iterations = iterations
	o.Rollout.Env = "sealedbid"
	o.Rollout.Params = map[string]any{"rounds": 1, "bidders": 2}
	o.Rollout.Model, o.Rollout.LlamaLib = path, lib
	o.Rollout.Episodes, o.Rollout.Parallel = 8, 4
	o.Rollout.MaxTokens, o.Rollout.Context = 8, 1024
	o.Estimator = "rae"
	o.Train.Epochs, o.Train.MiniBatch = 1, 4
	o.Train.LR, o.Train.ValueLR = 0.01, 0.01
	o.Eval.Every = 0
	o.League = loop.DefaultLeague()
	o.League.Enabled, o.League.Scripted, o.League.SnapshotEvery = true, []string{"shading"}, 1
	o.SaveTrajectories = true
	return o
}

// train runs o in dir, through a cluster when o.Cluster is enabled (with
// start called once the learner is attached).
func train(t *testing.T, dir string, o loop.Options, start func(l *Learner)) *Learner {
	t.Helper()
	r, err := loop.Open(dir, o, loop.Fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var l *Learner
	if o.Cluster.Enabled {
		if l, err = Attach(context.Background(), r, testLog{t}); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		start(l)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// openCluster opens a run in dir and attaches a learner to it; the caller
// closes both.
func openCluster(t *testing.T, dir string, o loop.Options, mode loop.Mode, log io.Writer) (*loop.Run, *Learner) {
	t.Helper()
	r, err := loop.Open(dir, o, mode, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Attach(context.Background(), r, log)
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	return r, l
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// workerProc is a worker process and the lines it logged.
type workerProc struct {
	cmd     *exec.Cmd
	started chan struct{} // closed at its first "playing episodes"
}

func startWorker(t testing.TB, url, name, id, cache string) *workerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OMAR_CLUSTER_TEST_WORKER="+url, "OMAR_CLUSTER_TEST_NAME="+name,
		"OMAR_CLUSTER_TEST_ID="+id, "OMAR_CLUSTER_TEST_CACHE="+cache)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, started: make(chan struct{})}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			if strings.Contains(sc.Text(), "playing episodes") {
				once.Do(func() { close(w.started) })
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	return w
}

// TestClusterEqualsSingleProcess trains 2 iterations of a league run in
// one process, and again as a learner with worker processes on an
// embedded server, staleness 0: the first worker is killed in the middle
// of its first work item, two more join. The episode records, the
// trajectories' tokens and policy versions and the final adapter must be
// the single-process run's, and every episode must be counted once.
func TestClusterEqualsSingleProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model twice, with worker processes")
	}
	dir := t.TempDir()
	single := filepath.Join(dir, "single")
	o := tinyOptions(t, dir, 2)
	train(t, single, o, nil)

	o.Cluster = loop.DefaultCluster()
	o.Cluster.Enabled, o.Cluster.Workers, o.Cluster.Chunk, o.Cluster.AckWait = true, 0, 2, 1
	o.Cluster.Name = "test-eq"
	o.Cluster.Listen = "127.0.0.1:0"
	clustered := filepath.Join(dir, "cluster")
	cache := filepath.Join(dir, "cache")
	l := train(t, clustered, o, func(l *Learner) {
		doomed := startWorker(t, l.URL(), o.Cluster.Name, "doomed", cache)
		go func() {
			<-doomed.started
			doomed.cmd.Process.Kill()
			startWorker(t, l.URL(), o.Cluster.Name, "w1", cache)
			startWorker(t, l.URL(), o.Cluster.Name, "w2", cache)
		}()
	})
	t.Logf("duplicates dropped: %d", l.Duplicates())

	for _, f := range []string{runfiles.EpisodesFile, runfiles.AdapterFile} {
		a, b := readFile(t, filepath.Join(single, f)), readFile(t, filepath.Join(clustered, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the single-process and the cluster run (%d and %d bytes)", f, len(a), len(b))
		}
	}
	a, b := trajectories(t, single), trajectories(t, clustered)
	if len(a) != len(b) {
		t.Fatalf("%d trajectories in the single-process run, %d in the cluster run", len(a), len(b))
	}
	seen := map[[2]int]bool{}
	for i := range a {
		key := [2]int{b[i].Episode, b[i].Seat}
		if seen[key] {
			t.Errorf("episode %d seat %d counted twice", key[0], key[1])
		}
		seen[key] = true
		if a[i].Episode != b[i].Episode || !slices.Equal(a[i].Tokens, b[i].Tokens) || !slices.Equal(a[i].PolicyVersions, b[i].PolicyVersions) || a[i].Reward != b[i].Reward {
			t.Errorf("trajectory %d (episode %d seat %d) differs", i, a[i].Episode, a[i].Seat)
		}
	}
	if want := o.Iterations * o.Rollout.Episodes; lines(readFile(t, filepath.Join(clustered, runfiles.EpisodesFile))) != want {
		t.Errorf("episodes.jsonl: want %d episodes", want)
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lines(b []byte) int { return bytes.Count(b, []byte{'\n'}) }

func trajectories(t *testing.T, dir string) []selfplay.Trajectory {
	t.Helper()
	var out []selfplay.Trajectory
	dec := json.NewDecoder(bytes.NewReader(readFile(t, filepath.Join(dir, runfiles.TrajectoriesFile))))
	for dec.More() {
		var tr selfplay.Trajectory
		if err := dec.Decode(&tr); err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

// TestClusterResumeAndStaleness interrupts a cluster run with two
// in-process workers in iteration 2's rollout and resumes it under a new
// learner: it must end as the uninterrupted single-process run. Then a
// run with staleness 1 (the next iteration's work published ahead) must
// play every episode once and record the lag.
func TestClusterResumeAndStaleness(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model three times")
	}
	dir := t.TempDir()
	single := filepath.Join(dir, "single")
	o := tinyOptions(t, dir, 3)
	train(t, single, o, nil)

	o.Cluster = loop.DefaultCluster()
	o.Cluster.Enabled, o.Cluster.Name = true, "test-resume"
	resumed := filepath.Join(dir, "resumed")
	r, l := openCluster(t, resumed, o, loop.Fresh, testLog{t})
	ctx, cancel := context.WithCancel(context.Background())
	r.Hooks.Episode = func(it, done, total int) {
		if it == 2 && done == 3 {
			cancel()
		}
	}
	err := r.Train(ctx)
	l.Close()
	r.Close()
	if !errors.Is(err, context.Canceled) || r.State().Iteration != 1 {
		t.Fatalf("interrupted run: got %v after iteration %d, want context.Canceled after 1", err, r.State().Iteration)
	}
	ro, err := loop.ReadConfig(resumed)
	if err != nil {
		t.Fatal(err)
	}
	r, l = openCluster(t, resumed, ro, loop.Resume, testLog{t})
	err = r.Train(context.Background())
	l.Close()
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{runfiles.EpisodesFile, runfiles.AdapterFile} {
		if !bytes.Equal(readFile(t, filepath.Join(single, f)), readFile(t, filepath.Join(resumed, f))) {
			t.Errorf("%s of the resumed cluster run differs from the single-process run's", f)
		}
	}

	o.Cluster.Staleness, o.Cluster.Name = 1, "test-stale"
	stale := filepath.Join(dir, "stale")
	train(t, stale, o, func(*Learner) {})
	var lagged int
	for _, line := range bytes.Split(bytes.TrimSpace(readFile(t, filepath.Join(stale, runfiles.MetricsFile))), []byte{'\n'}) {
		var m runfiles.Metrics
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if m.StalenessMax > 1 {
			t.Errorf("iteration %d: an episode lagged %d versions, staleness is 1", m.Iteration, m.StalenessMax)
		}
		lagged += m.StalenessMax
	}
	if lagged == 0 {
		t.Error("staleness 1: no iteration trained on work published ahead")
	}
	idx := map[int]bool{}
	for _, tr := range trajectories(t, stale) {
		idx[tr.Episode] = true
	}
	if len(idx) != o.Iterations*o.Rollout.Episodes {
		t.Errorf("staleness 1: %d distinct episodes trained, want %d", len(idx), o.Iterations*o.Rollout.Episodes)
	}
}

// TestClusterWorkerError: a worker that cannot play the run (here its
// --model is another file than the run's) reports it, and the learner's
// iteration fails with the worker's reason instead of waiting forever.
func TestClusterWorkerError(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(t, dir, 1)
	o.Cluster = loop.DefaultCluster()
	o.Cluster.Enabled, o.Cluster.Workers, o.Cluster.Name = true, 0, "test-err"
	r, l := openCluster(t, filepath.Join(dir, "run"), o, loop.Fresh, testLog{t})
	defer r.Close()
	defer l.Close()
	other := filepath.Join(dir, "other.gguf")
	if err := model.WriteFile(other, model.Options{Seed: 2}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }() // no logging after the test
	go func() {
		defer close(done)
		Work(ctx, WorkerOptions{URL: l.URL(), Name: "test-err", ID: "wrong-model", Model: other, Cache: filepath.Join(dir, "cache"), Log: testLog{t}})
	}()
	_, err := r.Step(context.Background())
	if err == nil || !strings.Contains(err.Error(), "wrong-model") || !strings.Contains(err.Error(), "not the run's model") {
		t.Fatalf("got %v, want the worker's error", err)
	}
}

// TestClusterStrayResult: a message on the results subject that is not a
// worker's result is dropped with a note; the iteration completes.
func TestClusterStrayResult(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(t, dir, 1)
	o.Cluster = loop.DefaultCluster()
	o.Cluster.Enabled, o.Cluster.Name = true, "test-stray"
	var log strings.Builder
	var mu sync.Mutex
	r, l := openCluster(t, filepath.Join(dir, "run"), o, loop.Fresh, lockedWriter{&mu, &log})
	defer r.Close()
	defer l.Close()
	nc, err := nats.Connect(l.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), namesFor("test-stray").results, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(log.String(), "dropped a result message") {
		t.Errorf("no note of the stray message in %q", log.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
