package loop

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/selfplay"
)

func TestClusterValidate(t *testing.T) {
	c := DefaultCluster()
	c.Enabled = true
	for _, tc := range []struct {
		name string
		mod  func(*ClusterOptions)
		want string
	}{
		{"empty name", func(c *ClusterOptions) { c.Name = "" }, "cluster.name"},
		{"subject characters", func(c *ClusterOptions) { c.Name = "a.b" }, "cluster.name"},
		{"wildcard", func(c *ClusterOptions) { c.Name = "run>" }, "cluster.name"},
		{"workers", func(c *ClusterOptions) { c.Workers = -1 }, "cluster.workers"},
		{"chunk", func(c *ClusterOptions) { c.Chunk = 0 }, "cluster.chunk"},
		{"staleness", func(c *ClusterOptions) { c.Staleness = -2 }, "cluster.staleness"},
		{"ack wait", func(c *ClusterOptions) { c.AckWait = 0.5 }, "cluster.ack_wait"},
		{"ack wait NaN", func(c *ClusterOptions) { c.AckWait = math.NaN() }, "cluster.ack_wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := c
			tc.mod(&d)
			if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	off := ClusterOptions{}
	if err := off.Validate(); err != nil {
		t.Errorf("a run without a cluster: %v", err)
	}
}

// TestClusterConfig: a config's cluster section merges into the
// defaults, and a misspelt key is refused by name.
func TestClusterConfig(t *testing.T) {
	o := Options{}.Defaults()
	if err := strictyaml.Decode(strings.NewReader("cluster:\n  enabled: true\n  workers: 3\n"), &o); err != nil {
		t.Fatal(err)
	}
	if c := o.Cluster; !c.Enabled || c.Workers != 3 || c.Chunk != DefaultCluster().Chunk || c.Name != "omar" {
		t.Errorf("cluster section %+v", c)
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
	err := strictyaml.Decode(strings.NewReader("cluster:\n  worker: 3\n"), &o)
	if err == nil || !strings.Contains(err.Error(), "worker") {
		t.Errorf("misspelt key: got %v", err)
	}
}

// TestClusterExamples: the example cluster configs decode strictly and
// validate.
func TestClusterExamples(t *testing.T) {
	paths, err := filepath.Glob("../examples/cluster*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example cluster configs (%v)", err)
	}
	for _, p := range paths {
		o := Options{}.Defaults()
		if err := strictyaml.DecodeFile(p, &o); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := o.Validate(); err != nil || !o.Cluster.Enabled {
			t.Errorf("%s: %v (enabled %v)", p, err, o.Cluster.Enabled)
		}
	}
}

// TestOldLogprobs: a trajectory an older policy played is weighed against
// the logprobs it was sampled with, one of the current policy against the
// trainer's.
func TestOldLogprobs(t *testing.T) {
	scored, raw := []float32{0, -1, -2}, []float32{0, -1.5, -2.5}
	for _, tc := range []struct {
		versions []int
		want     []float32
	}{
		{[]int{3, 3}, scored},
		{[]int{2, 3}, raw},
		{[]int{2, 2}, raw},
		{nil, scored},
	} {
		tr := &selfplay.Trajectory{PolicyVersions: tc.versions, RawLogprobs: raw}
		if got := oldLogprobs(tr, scored, 3, false); &got[0] != &tc.want[0] {
			t.Errorf("versions %v: got %v, want %v", tc.versions, got, tc.want)
		}
	}
}
