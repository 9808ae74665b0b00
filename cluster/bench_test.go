package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
)

// BenchmarkClusterRollout measures rollout throughput of the built-in
// run (the built-in model, Craigslist, league casts) played by 1, 2 and
// 4 worker processes of one llama.cpp thread each, collected by a
// learner on an embedded server. Each b.N plays OMAR_BENCH_EPISODES
// episodes (default 32) after a warm-up round; it reports episodes/s
// and generated tokens/s.
//
//	OMAR_LLAMA_LIB=$PWD/lib/llama/cpu go test ./cluster -run '^$' -bench ClusterRollout -benchtime 3x
func BenchmarkClusterRollout(b *testing.B) {
	lib := llamatest.LibDir()
	if lib == "" {
		b.Skip("the llama.cpp libraries are not installed (make deps)")
	}
	episodes := 32
	if v, err := strconv.Atoi(os.Getenv("OMAR_BENCH_EPISODES")); err == nil && v > 0 {
		episodes = v
	}
	b.Logf("%d CPUs", runtime.NumCPU())
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			dir := b.TempDir()
			o := loop.Options{}.Defaults()
			o.Rollout.LlamaLib, o.Rollout.Threads = lib, 1
			o.Rollout.Episodes = episodes
			o.Eval.Every = 0
			o.Cluster = loop.DefaultCluster()
			o.Cluster.Enabled, o.Cluster.Workers, o.Cluster.Name = true, 0, "bench"
			r, err := loop.Open(filepath.Join(dir, "run"), o, loop.Fresh, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			l, err := Attach(context.Background(), r, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var procs []*workerProc
			for i := range workers {
				procs = append(procs, startWorker(b, l.URL(), o.Cluster.Name, "bench-"+strconv.Itoa(i), filepath.Join(dir, "cache")))
			}
			cpu := func() (sec float64) {
				for _, p := range procs {
					sec += cpuSeconds(b, p.cmd.Process.Pid)
				}
				return sec
			}
			ctx := context.Background()
			first := 0
			round := func() (tokens int64) {
				if err := l.Publish(ctx, loop.Work{Iteration: 1, First: first, N: episodes}); err != nil {
					b.Fatal(err)
				}
				st, err := l.Collect(ctx, first, episodes, 0, func(*loop.Episode) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				first += episodes
				return st.GeneratedTokens
			}
			round() // the workers load the model and warm their caches
			b.ResetTimer()
			start, cpu0, self0 := time.Now(), cpu(), cpuSeconds(b, os.Getpid())
			var tokens int64
			for range b.N {
				tokens += round()
			}
			sec, used, self := time.Since(start).Seconds(), cpu()-cpu0, cpuSeconds(b, os.Getpid())-self0
			b.ReportMetric(float64(b.N*episodes)/sec, "episodes/s")
			b.ReportMetric(float64(tokens)/sec, "tokens/s")
			// The cores the workers kept busy, and their CPU time per
			// episode: scale-out overhead shows as the latter growing.
			b.ReportMetric(used/sec, "worker-cores")
			b.ReportMetric(used/float64(b.N*episodes), "cpu-s/episode")
			// The learner's share: the embedded server, decoding results.
			b.ReportMetric(self/sec, "learner-cores")
		})
	}
}

// cpuSeconds is the user and system CPU time of process pid so far.
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the parenthesised command name: utime and stime
	// are the 12th and 13th of them, in clock ticks (100 a second on
	// Linux).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}
