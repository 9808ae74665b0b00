package train

import (
	"fmt"
	"testing"
)

// TestGraphBytesMatchesAllocator compares graphBytes, the prediction made
// before allocation, with the compute buffer ggml's scheduler then
// allocates for the same graph: one-graph and segmented passes, scoring and
// training, with and without attention blocks.
func TestGraphBytesMatchesAllocator(t *testing.T) {
	tr := newTrainer(t, "qwen3", testOptions())
	for _, c := range []struct {
		name string
		key  func(T int) (*built, error)
	}{
		{"one_graph_train", func(T int) (*built, error) { return tr.graph(graphKey{kindTrain, tr.ppo, 1, T, 64}) }},
		{"one_graph_score", func(T int) (*built, error) { return tr.graph(graphKey{kindPolicy, nil, 1, T, 64}) }},
		{"layer_grad", func(T int) (*built, error) {
			return tr.segGraph(segKey{kind: segGrad, layer: 1, adapterOn: true, b: 1, t: T})
		}},
		{"layer_forward", func(T int) (*built, error) {
			return tr.segGraph(segKey{kind: segForward, layer: 1, adapterOn: true, b: 1, t: T})
		}},
		{"head_train", func(T int) (*built, error) {
			return tr.segGraph(segKey{kind: segHead, head: kindTrain, obj: tr.ppo, b: 1, t: T, k: 64})
		}},
	} {
		for _, T := range []int{64, 256, 1024} {
			t.Run(fmt.Sprintf("%s/%d", c.name, T), func(t *testing.T) {
				b, err := c.key(T)
				if err != nil {
					t.Fatal(err)
				}
				want := graphBytes(b.g)
				// A fresh scheduler: its buffer is this graph's alone.
				tr.sched.Free()
				if err := tr.newSched(2 * b.size); err != nil {
					t.Fatal(err)
				}
				b.ctx.ResetAllocation()
				if err := tr.sched.Alloc(b.g); err != nil {
					t.Fatal(err)
				}
				got := int64(tr.sched.BufferSize(tr.backends[0]))
				t.Logf("allocated %d, predicted %d (%.3f)", got, want, float64(want)/float64(got))
				if r := float64(want) / float64(got); r < 0.8 || r > 1.2 {
					t.Errorf("predicted %d bytes, allocator took %d (ratio %.3f), want within 20%%", want, got, r)
				}
			})
		}
	}
}
