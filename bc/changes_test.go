package bc

import (
	"reflect"
	"strings"
	"testing"
)

func TestBuildChanges(t *testing.T) {
	recipe := DefaultBuild()
	// The trainer's threads always apply: 0 sizes them to the free cores.
	recipe.Train.Threads = 0
	for _, tc := range []struct {
		name  string
		edit  func(*BuildChanges)
		check func(o BuildOptions) bool
		err   string
	}{
		{"none", func(*BuildChanges) {}, func(o BuildOptions) bool { return reflect.DeepEqual(o, recipe) }, ""},
		{"steps", func(c *BuildChanges) { c.Steps = 7 }, func(o BuildOptions) bool { return o.Steps == 7 && o.Train.TotalSteps == 7 }, ""},
		{"episodes", func(c *BuildChanges) { c.Episodes = 3 }, func(o BuildOptions) bool {
			return o.Corpus.Envs[0].Episodes == 3 && o.Corpus.Envs[len(o.Corpus.Envs)-1].Episodes == 3
		}, ""},
		{"scale", func(c *BuildChanges) { c.CorpusScale = 2 }, func(o BuildOptions) bool {
			return o.Corpus.Envs[0].Episodes == 2*recipe.Corpus.Envs[0].Episodes
		}, ""},
		{"dagger", func(c *BuildChanges) {
			c.DaggerRounds, c.DaggerSteps, c.DaggerMaxPerSeat, c.DaggerEnvs = 2, 5, 0, []string{" dealornodeal "}
		}, func(o BuildOptions) bool {
			return o.Dagger.Rounds == 2 && o.Dagger.Steps == 5 && o.Dagger.MaxPerSeat == 0 && len(o.Dagger.Games) == 1
		}, ""},
		{"preset, seed, threads, kernels", func(c *BuildChanges) { c.Preset, c.Seed, c.Threads, c.CPUVariant = "tiny", 9, 2, "x" }, func(o BuildOptions) bool {
			return o.Preset == "tiny" && o.Seed == 9 && o.Train.Threads == 2 && o.CPUVariant == "x"
		}, ""},
		{"both corpus sizes", func(c *BuildChanges) { c.Episodes, c.CorpusScale = 3, 2 }, nil, "give one"},
		{"scale out of range", func(c *BuildChanges) { c.CorpusScale = -1 }, nil, "--corpus-scale -1"},
		{"unknown preset", func(c *BuildChanges) { c.Preset = "huge" }, nil, `--preset "huge"`},
		{"negative threads", func(c *BuildChanges) { c.Threads = -1 }, nil, "--threads -1"},
		{"unknown dagger env", func(c *BuildChanges) { c.DaggerEnvs = []string{"nowhere"} }, nil, "--dagger-envs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := BuildChanges{}.Defaults()
			tc.edit(&c)
			o, err := c.Apply(DefaultBuild())
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got error %v, want one containing %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("got error %v", err)
			case tc.check != nil && !tc.check(o):
				t.Errorf("the change did not apply: %+v", o)
			}
		})
	}
}
