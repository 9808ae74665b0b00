package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// memChildEnv carries the measurement a child process runs (TestMemoryChild):
// "MODE TOKENS THREADS ACTIVATION_MB LAYERS TRAINED" (TRAINED: of every 128
// tokens).
const memChildEnv = "OMAR_TRAIN_MEMORY_CHILD"

// memResult is what a child process reports.
type memResult struct {
	Mode      string  `json:"mode"`
	Tokens    int     `json:"tokens"`
	Layers    int     `json:"layers"`
	Trained   int     `json:"trained"`
	Predicted int64   `json:"predicted"`
	Static    int64   `json:"static"`
	Compute   int64   `json:"compute"`
	Host      int64   `json:"host"`
	Peak      int64   `json:"peak"`      // VmHWM over the step
	LoadPeak  int64   `json:"load_peak"` // VmHWM over loading the trainer
	Seconds   float64 `json:"seconds"`
	CPU       float64 `json:"cpu_seconds"` // user+system CPU time of the step
	Segmented bool    `json:"segmented"`
	Err       string  `json:"err,omitempty"`
}

// standinSequence is one sequence of n random tokens of which a quarter are
// trained (blocks of 96 prompt and 32 generated tokens, as a seat stream
// alternates), with every field a PPO step reads.
func standinSequence(n, vocab int) Sequence { return standinSequenceTrained(n, vocab, 32) }

// standinSequenceTrained trains the last `trained` tokens of every 128.
func standinSequenceTrained(n, vocab, trained int) Sequence {
	r := rand.New(rand.NewPCG(uint64(n), 5))
	s := Sequence{Tokens: make([]int32, n), Mask: make([]bool, n), OldLogprobs: make([]float32, n), Advantages: make([]float32, n),
		Returns: make([]float32, n), OldValues: make([]float32, n), RefLogprobs: make([]float32, n)}
	for i := range n {
		s.Tokens[i] = int32(r.IntN(vocab))
		if i > 0 && i%128 >= 128-trained {
			s.Mask[i] = true
			s.OldLogprobs[i] = -12 + float32(r.NormFloat64())
			s.RefLogprobs[i] = -12 + float32(r.NormFloat64())
			s.Advantages[i] = float32(r.NormFloat64())
			s.Returns[i] = float32(r.NormFloat64())
		}
	}
	return s
}

// vmHWM is the process's peak resident memory (VmHWM in /proc/self/status).
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestMemoryChild is one measurement of BenchmarkTrainingMemory, run in a
// child process of its own so that its peak resident memory is the step's.
// Modes: ppo (a PPO step, the default path), ppo-onegraph (the same as one
// graph, refused by the memory check when it would not fit), score
// (Evaluate: the policy and reference scoring passes), check
// (CheckSequence alone).
func TestMemoryChild(t *testing.T) {
	spec := os.Getenv(memChildEnv)
	if spec == "" {
		t.Skip("a child process of BenchmarkTrainingMemory")
	}
	var mode string
	var n, threads, mb, layers, trained int
	if _, err := fmt.Sscanf(spec, "%s %d %d %d %d %d", &mode, &n, &threads, &mb, &layers, &trained); err != nil {
		t.Fatalf("%s=%q: %v", memChildEnv, spec, err)
	}
	o := Options{}.Defaults()
	o.Threads, o.ActivationMB, o.Epochs, o.MiniBatch = threads, mb, 1, 1
	o.BatchTokens = max(o.BatchTokens, n)
	tr, err := New(qwen3StandinLayers(t, layers), o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res := memResult{Mode: mode, Tokens: n, Layers: layers, LoadPeak: vmHWM()}
	// Measure the step's peak, not the load's: writing 5 to clear_refs
	// resets VmHWM to the current resident size (Linux ≥ 4.0).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak resident size: %v", err)
	}
	seqs := []Sequence{standinSequenceTrained(n, tr.Vocab(), trained)}
	res.Trained = trainedTokens(seqs[0])
	if mode == "ppo-onegraph" {
		tr.segmentMode = -1
	}
	plan, err := tr.PlanPasses(seqs, mode != "score")
	if err != nil {
		t.Fatal(err)
	}
	res.Predicted, res.Static, res.Compute, res.Host, res.Segmented = plan.Total(), plan.Static, plan.Compute, plan.Host, plan.Segmented
	ctx := context.Background()
	start, cpu0 := time.Now(), cpuSeconds()
	switch mode {
	case "ppo", "ppo-onegraph":
		_, err = tr.Step(ctx, seqs)
	case "score":
		_, err = tr.Evaluate(ctx, seqs)
	case "check":
		err = tr.CheckSequence(n)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	res.Seconds, res.CPU = time.Since(start).Seconds(), cpuSeconds()-cpu0
	if err != nil {
		res.Err = err.Error()
	}
	res.Peak = vmHWM()
	out, _ := json.Marshal(res)
	fmt.Printf("MEMRESULT %s\n", out)
}

// BenchmarkTrainingMemory measures the peak resident memory and time of one
// training step (and scoring pass) on the qwen3-0.6b stand-in against the
// sequence length, each in a child process, next to the memory check's
// prediction. OMAR_MEMORY_RUNS lists the runs as MODE:TOKENS,… (default
// ppo at 512, 1024, 2048 and 4096); OMAR_MEMORY_THREADS the CPU threads
// (default 2); OMAR_MEMORY_MB Options.ActivationMB (default 0: the
// default); OMAR_MEMORY_LAYERS the stand-in's layers (default 28, the real
// depth); OMAR_MEMORY_TRAINED the trained tokens of every 128 (default 32).
// Run one at a time: a 4,096-token step takes minutes on two cores.
func BenchmarkTrainingMemory(b *testing.B) {
	layers, trained := envInt("OMAR_MEMORY_LAYERS", qwen3Shape.BlockCount), envInt("OMAR_MEMORY_TRAINED", 32)
	qwen3StandinLayers(b, layers)
	runs := os.Getenv("OMAR_MEMORY_RUNS")
	if runs == "" {
		runs = "ppo:512,ppo:1024,ppo:2048,ppo:4096"
	}
	threads, mb := envInt("OMAR_MEMORY_THREADS", 2), envInt("OMAR_MEMORY_MB", 0)
	for _, r := range strings.Split(runs, ",") {
		mode, tokens, _ := strings.Cut(r, ":")
		b.Run(mode+"/"+tokens, func(b *testing.B) {
			var res memResult
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.v", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d %d %d", memChildEnv, mode, tokens, threads, mb, layers, trained))
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				found := false
				sc := bufio.NewScanner(bytes.NewReader(out))
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					if line, ok := strings.CutPrefix(sc.Text(), "MEMRESULT "); ok {
						found = json.Unmarshal([]byte(line), &res) == nil
					}
				}
				if !found {
					b.Fatalf("child: %v\n%s\n%s", err, out, stderr.Bytes())
				}
			}
			gb := func(n int64) float64 { return float64(n) / (1 << 30) }
			b.ReportMetric(gb(res.Peak), "peak-GiB")
			b.ReportMetric(gb(res.Predicted), "predicted-GiB")
			if res.Peak > 0 {
				b.ReportMetric(float64(res.Predicted)/float64(res.Peak), "predicted/peak")
			}
			b.ReportMetric(res.Seconds, "s/step")
			b.ReportMetric(res.CPU, "cpu-s/step")
			b.ReportMetric(gb(res.LoadPeak), "load-peak-GiB")
			b.Logf("%s, %d layers, %d tokens (%d trained): load peak %.2f GiB, step peak %.2f GiB, predicted %.2f GiB (static %.2f, compute %.2f, host %.2f), segmented %v, %.1f s (%.1f CPU-s), err %q",
				res.Mode, res.Layers, res.Tokens, res.Trained, gb(res.LoadPeak), gb(res.Peak), gb(res.Predicted), gb(res.Static), gb(res.Compute), gb(res.Host), res.Segmented, res.Seconds, res.CPU, res.Err)
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestStandinPlans logs the memory check's predictions for a PPO step and a
// scoring pass on the qwen3-0.6b stand-in from 512 to OMAR_STANDIN_PLANS
// tokens (a power of two), on the default path and as one graph, and the
// longest sequence the host's available memory allows (one-graph plans up
// to OMAR_STANDIN_ONEGRAPH tokens). Nothing but the
// trainer's weights is allocated: the graphs are planned, not run.
func TestStandinPlans(t *testing.T) {
	top, err := strconv.Atoi(os.Getenv("OMAR_STANDIN_PLANS"))
	if err != nil || top < 512 {
		t.Skip("set OMAR_STANDIN_PLANS=TOKENS to plan on the qwen3-0.6b stand-in")
	}
	o := Options{}.Defaults()
	o.BatchTokens = top
	if mb := envInt("OMAR_MEMORY_MB", 0); mb > 0 {
		o.ActivationMB = mb
	}
	tr, err := New(qwen3Standin(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	gb := func(n int64) float64 { return float64(n) / (1 << 30) }
	for n := 512; n <= top; n *= 2 {
		seqs := []Sequence{standinSequence(n, tr.Vocab())}
		for _, c := range []struct {
			name  string
			mode  int
			train bool
		}{{"ppo", 0, true}, {"ppo-onegraph", -1, true}, {"score", 0, false}} {
			if c.mode < 0 && n > envInt("OMAR_STANDIN_ONEGRAPH", top) {
				continue // its graph alone takes minutes to build
			}
			tr.segmentMode = c.mode
			p, err := tr.PlanPasses(seqs, c.train)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%-13s %6d tokens: total %6.2f GiB = static %.2f + compute %.2f + host %.2f + overhead %.2f, segmented %v",
				c.name, n, gb(p.Total()), gb(p.Static), gb(p.Compute), gb(p.Host), gb(p.Overhead), p.Segmented)
		}
	}
	tr.segmentMode = 0
	avail, _, _ := availableMemory()
	held := int64(tr.sched.BufferSize(tr.backends[0]))
	t.Logf("available %.2f GiB: the longest sequence a PPO step fits is about %d tokens (every token trained: %d)",
		gb(avail), tr.longestFitting(true, tr.ppo, 0.25, avail, held, false), tr.longestFitting(true, tr.ppo, 1, avail, held, false))
}
