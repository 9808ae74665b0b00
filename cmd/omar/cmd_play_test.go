package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/omar-selfplay/omar/envs"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/jsonl"
)

func TestPlayWritesRecordsDeterministically(t *testing.T) {
	dir := t.TempDir()
	var files [][]byte
	for _, parallel := range []string{"1", "4"} {
		p := filepath.Join(dir, "ep"+parallel+".jsonl")
		stdout, stderr, code := runCLI(t, "play", "--env", "sealedbid", "--episodes", "6", "--seed", "9", "--parallel", parallel, "--out", p)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "sealedbid_v1: 6 episodes") || !strings.Contains(stdout, "mean reward") {
			t.Errorf("summary missing from output:\n%s", stdout)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatalf("records differ between --parallel 1 and 4")
	}
	lines := strings.Split(strings.TrimSpace(string(files[0])), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d records, want 6", len(lines))
	}
	var rec engine.Record
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Env != "sealedbid_v1" || rec.EnvName != "sealedbid" || rec.EnvVersion != 1 || len(rec.Seats) != 3 || rec.Seats[0].Agent != "scripted:shading" || len(rec.Events) == 0 || rec.Scenario == nil {
		t.Errorf("record incomplete: %+v", rec)
	}
}

func TestPlayAgentsBySeat(t *testing.T) {
	stdout, stderr, code := runCLI(t, "play", "--env", "sealedbid_v1", "--agents", "shading,random,random", "--episodes", "3")
	if code != 0 || !strings.Contains(stdout, "bidder (scripted:random)") || !strings.Contains(stdout, "bidder (scripted:shading)") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestPlayConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("env: sealedbid\nepisodes: 2\nparams:\n  rounds: 1\n  bidders: 2\n"), 0o644)
	stdout, stderr, code := runCLI(t, "play", "--config", good, "--episodes", "3")
	if code != 0 || !strings.Contains(stdout, "sealedbid_v1: 3 episodes") {
		t.Fatalf("flags should override the config: exit %d\n%s\n%s", code, stdout, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("env: sealedbid\nepisodes: 2\nepisdoes: 3\n"), 0o644)
	_, stderr, code = runCLI(t, "play", "--config", bad)
	if code == 0 || !strings.Contains(stderr, "line 3") || !strings.Contains(stderr, "episdoes") {
		t.Fatalf("unknown key: exit %d, stderr %q; want an error naming line 3 and the key", code, stderr)
	}
}

func TestPlayErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no env", []string{"play"}, "no environment"},
		{"unknown env", []string{"play", "--env", "chess"}, "unknown environment"},
		{"unknown policy", []string{"play", "--env", "sealedbid", "--agents", "genius"}, "no scripted policy"},
		{"agent count", []string{"play", "--env", "sealedbid", "--agents", "random,random"}, "2 agents for the 3 seats"},
		{"bad params", []string{"play", "--env", "sealedbid", "--params", "{"}, "--params"},
		{"invalid params", []string{"play", "--env", "sealedbid", "--params", `{"bidders":1}`}, "bidders"},
		{"unknown command", []string{"plya"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want failure mentioning %q", code, stderr, tc.want)
			}
		})
	}
}

func TestEnvs(t *testing.T) {
	stdout, _, code := runCLI(t, "envs", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var infos []envs.Entry
	if err := json.Unmarshal([]byte(stdout), &infos); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, i := range infos {
		ids[i.ID] = true
		if len(i.Seats) == 0 || len(i.Policies) == 0 || i.Description == "" {
			t.Errorf("%s: incomplete %+v", i.ID, i)
		}
	}
	if !ids["sealedbid_v1"] {
		t.Errorf("sealedbid_v1 missing from %v", ids)
	}
}

// TestPlaySotopiaWarns: omar play cannot judge SOTOPIA, so it says that
// every reward is 0 and how to score the records.
func TestPlaySotopiaWarns(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sotopia.jsonl")
	_, stderr, code := runCLI(t, "play", "--env", "sotopia", "--episodes", "1", "--out", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"LLM judge", "reward is 0", "omar judge --model JUDGE.gguf --out judged.jsonl " + p} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q, want it to contain %q", stderr, want)
		}
	}
	if _, stderr, _ := runCLI(t, "play", "--env", "casino", "--episodes", "1"); strings.Contains(stderr, "judge") {
		t.Errorf("casino warned about a judge: %q", stderr)
	}
}

// countingGame counts the episodes dealt.
type countingGame struct {
	engine.Game
	dealt atomic.Int64
}

func (g *countingGame) NewEpisode(seed uint64, p engine.Params) (engine.Episode, error) {
	g.dealt.Add(1)
	return g.Game.NewEpisode(seed, p)
}

// TestPlayStalledWriter: while the record writer is stalled, omar play
// deals no more than --parallel episodes: each finished one holds its
// slot until its record is written (it used to deal on and keep every
// record, 1.46 GB for 20k CaSiNo episodes into a stalled pipe).
func TestPlayStalledWriter(t *testing.T) {
	casino, err := envs.Find("casino")
	if err != nil {
		t.Fatal(err)
	}
	g := &countingGame{Game: casino}
	cfg := engine.ScriptedConfig{Env: "casino", Agents: []string{"scripted"}, Episodes: 500, Seed: 1, Parallel: 4}
	release := make(chan struct{})
	var peak int64
	done := make(chan error, 1)
	go func() {
		first := true
		run := engine.ScriptedRun{Game: g, Agents: cfg.Agents, Episodes: cfg.Episodes, Seed: cfg.Seed, Parallel: cfg.Parallel, Options: engine.DefaultOptions()}
		done <- engine.PlayScripted(context.Background(), run, func(*engine.Record) error {
			if first {
				first = false
				// Stalled: everything the scheduler may start has time
				// to start and finish.
				time.Sleep(300 * time.Millisecond)
				peak = g.dealt.Load()
				close(release)
			}
			return nil
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-release
	if peak > int64(cfg.Parallel) {
		t.Errorf("%d episodes dealt while the writer stalled on the first, want ≤ parallel %d", peak, cfg.Parallel)
	}
	if got := g.dealt.Load(); got != int64(cfg.Episodes) {
		t.Errorf("%d episodes dealt in all, want %d", got, cfg.Episodes)
	}
}

// slowPipe is a consumer that reads 64 KiB every millisecond: far slower
// than the episodes are played.
func slowPipe(b *testing.B) (io.Writer, func()) {
	r, w := io.Pipe()
	stop := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
			select {
			case <-stop:
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return w, func() { close(stop); w.Close() }
}

// rssKB reads a field (VmRSS, VmHWM) of /proc/self/status in kB.
func rssKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb
		}
	}
	return -1
}

// BenchmarkPlaySoak plays OMAR_SOAK_EPISODES (default 20000) CaSiNo
// episodes, 8 at a time, into a slow pipe through the JSONL record writer
// and reports the peak Go heap and RSS: bounded by the parallelism, not
// the episode count. Run once:
//
//	go test ./cmd/omar -run '^$' -bench PlaySoak -benchtime 1x
func BenchmarkPlaySoak(b *testing.B) {
	n := 20000
	if s := os.Getenv("OMAR_SOAK_EPISODES"); s != "" {
		fmt.Sscan(s, &n)
	}
	g, err := envs.Find("casino")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		runtime.GC()
		w, stop := slowPipe(b)
		jw := jsonl.NewWriter(w)
		var peakHeap uint64
		sample := time.NewTicker(20 * time.Millisecond)
		quit := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var ms runtime.MemStats
			for {
				select {
				case <-quit:
					return
				case <-sample.C:
					runtime.ReadMemStats(&ms)
					peakHeap = max(peakHeap, ms.HeapInuse)
				}
			}
		}()
		start := time.Now()
		run := engine.ScriptedRun{Game: g, Agents: []string{"scripted"}, Episodes: n, Seed: 1, Parallel: 8, Options: engine.DefaultOptions()}
		err := engine.PlayScripted(context.Background(), run, func(r *engine.Record) error { return jw.Write(r) })
		if err == nil {
			err = jw.Close()
		}
		close(quit)
		<-sampled
		sample.Stop()
		stop()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "episodes/s")
		b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(rssKB("VmHWM"))/1024, "peak-RSS-MiB")
	}
}
