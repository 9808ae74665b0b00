package train

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCheckMemory(t *testing.T) {
	const gib = 1 << 30
	avail := func(n int64) func() (int64, string, error) {
		return func() (int64, string, error) { return n, "MemAvailable in /proc/meminfo", nil }
	}
	lora := memoryNeed{weights: 8 * gib, transposes: 7 * gib, transposesQ8: 7 * gib, logits: gib / 2} // Q8_0 copies already
	f32 := memoryNeed{weights: 8 * gib, transposes: 8 * gib, transposesQ8: 2 * gib, logits: gib / 2}
	full := memoryNeed{weights: 8 * gib, optimizer: 24 * gib, logits: gib / 2}
	for _, tc := range []struct {
		name  string
		need  memoryNeed
		avail func() (int64, string, error)
		want  []string // substrings of the error; nil: no error
	}{
		{"fits", lora, avail(16 * gib), nil},
		{"unknown memory", lora, func() (int64, string, error) { return 0, "", errors.New("no /proc") }, nil},
		{"zero reported", lora, avail(0), nil},
		{"without the copies it fits", lora, avail(10 * gib),
			[]string{"the model's weights (8.0 GiB)", "transposed copies for the backward pass (7.0 GiB)", "about 15.5 GiB", "10.0 GiB available (MemAvailable in /proc/meminfo)", "out_prod_backward: true"}},
		{"Q8_0 copies fit", f32, avail(12 * gib),
			[]string{"transposed copies for the backward pass (8.0 GiB)", "backward_type: q8_0", "(Q8_0 copies, 2.0 GiB", "out_prod_backward: true"}},
		{"only without the copies", f32, avail(9 * gib), []string{"set out_prod_backward: true"}},
		{"smaller passes fit", memoryNeed{weights: 8 * gib, logits: 4 * gib}, avail(9 * gib),
			[]string{"logits and their gradient (4.0 GiB)", "lower batch_tokens"}},
		{"full training", full, avail(20 * gib),
			[]string{"AdamW's moments and the gradients of full training (24.0 GiB)", "full: false"}},
		{"too big in any case", lora, avail(4 * gib), []string{"use a smaller model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMemory(tc.need, tc.avail)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestNewRefusesWhatDoesNotFit loads the tiny model with the memory
// reported just short of what the trainer needs: New refuses before
// allocating, naming the option that makes it fit, and with that option
// the same memory is enough.
func TestNewRefusesWhatDoesNotFit(t *testing.T) {
	path := tinyModel(t, "llama")
	probe := newTrainer(t, "llama", testOptions())
	need := probe.memoryNeed(probe.base)
	if need.transposes == 0 || need.weights == 0 || need.logits == 0 {
		t.Fatalf("memory need %+v: want weights, transposes and logits", need)
	}
	saved := availableMemory
	t.Cleanup(func() { availableMemory = saved })
	availableMemory = func() (int64, string, error) { return need.total() - 1, "test", nil }

	if tr, err := New(path, testOptions()); err == nil {
		tr.Close()
		t.Fatal("New succeeded with less memory than it needs")
	} else if !strings.Contains(err.Error(), "out_prod_backward: true") {
		t.Fatalf("error %q does not name out_prod_backward", err)
	}
	o := testOptions()
	o.OutProdBackward = true
	tr, err := New(path, o)
	if err != nil {
		t.Fatalf("without the transposed copies: %v", err)
	}
	tr.Close()
	// The tiny model's copies are F32 (its weights are): the refusal names
	// Q8_0 copies first where they fit, and they do.
	if need.transposesQ8 < need.transposes {
		q := testOptions()
		q.BackwardType = BackwardQ8_0
		tr, err := New(path, q)
		if err != nil {
			t.Fatalf("with Q8_0 copies: %v", err)
		}
		tr.Close()
	}
}

// TestPassRefusedBeforeAllocating reports less memory than a long pass
// needs: Step and Evaluate refuse it with the longest sequence that fits
// before the scheduler allocates anything for it, CheckSequence refuses the
// same length up front, and with the memory reported back the same pass
// runs.
func TestPassRefusedBeforeAllocating(t *testing.T) {
	tr := newTrainer(t, "qwen3", testOptions())
	randomize(tr, 3, 0.05)
	ctx := context.Background()
	long := randomSeqs(41, 1, 1500, 1501, tr.Vocab())
	short := randomSeqs(42, 1, 100, 101, tr.Vocab())
	plan, err := tr.PlanPasses(long, true)
	if err != nil {
		t.Fatal(err)
	}
	shortPlan, err := tr.PlanPasses(short, true)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Compute+plan.Host <= shortPlan.Compute+shortPlan.Host {
		t.Fatalf("plans: %d tokens need %d bytes, %d tokens %d: want more for the longer", plan.Tokens, plan.Compute+plan.Host, shortPlan.Tokens, shortPlan.Compute+shortPlan.Host)
	}
	saved := availableMemory
	t.Cleanup(func() { availableMemory = saved })
	// Room for the short sequence's pass, not the long one's.
	room := shortPlan.Compute + shortPlan.Host + (plan.Compute+plan.Host-shortPlan.Compute-shortPlan.Host)/4
	availableMemory = func() (int64, string, error) { return room, "test", nil }
	scorePlan, err := tr.PlanPasses(long, false)
	if err != nil {
		t.Fatal(err)
	}
	held := tr.sched.BufferSize(tr.backends[0])
	for _, c := range []struct {
		name string
		room int64
		run  func() error
	}{
		{"step", room, func() error { _, err := tr.Step(ctx, setOld(t, tr, long)); return err }},
		{"check", room, func() error { return tr.CheckSequence(1500) }},
		{"evaluate", (scorePlan.Compute + scorePlan.Host) * 3 / 4, func() error { _, err := tr.Evaluate(ctx, long); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			availableMemory = func() (int64, string, error) { return c.room, "test", nil }
			err := c.run()
			if err == nil {
				t.Fatal("got nil, want a refusal")
			}
			if !strings.Contains(err.Error(), "the longest sequence that fits is about") {
				t.Errorf("error %q does not name the longest sequence that fits", err)
			}
			if got := tr.sched.BufferSize(tr.backends[0]); got > held {
				t.Errorf("scheduler buffer grew from %d to %d bytes before the refusal", held, got)
			}
			t.Log(err)
		})
	}
	availableMemory = func() (int64, string, error) { return room, "test", nil }
	if err := tr.CheckSequence(100); err != nil {
		t.Errorf("CheckSequence(100): %v, want nil", err)
	}
	availableMemory = saved
	if _, err := tr.Step(ctx, setOld(t, tr, long)); err != nil {
		t.Fatalf("with the memory back: %v", err)
	}
}

// setOld gives seqs reference logprobs, so that a step runs no reference
// pass of its own.
func setOld(t *testing.T, tr *Trainer, seqs []Sequence) []Sequence {
	t.Helper()
	out := make([]Sequence, len(seqs))
	copy(out, seqs)
	for i := range out {
		n := len(out[i].Tokens)
		out[i].RefLogprobs = make([]float32, n)
	}
	return out
}
