// Package runfiles names the files of a training run's directory and
// holds the JSON type of its metrics lines: what a reader of a run needs
// (the dashboard, the cluster's learner, the command line, a plot) without
// linking the trainer or the llama backend that wrote it. Package loop
// writes these files; this package only knows their names and shapes.
package runfiles

// The files a run writes into its directory.
const (
	// ConfigFile is the effective config, which a resumed run reads back.
	ConfigFile = "config.yaml"
	// ModelFile is the model a run generates when it is given none.
	ModelFile = "model.gguf"
	// MetricsFile holds a Metrics line per iteration.
	MetricsFile = "metrics.jsonl"
	// EpisodesFile holds an episode record per line.
	EpisodesFile = "episodes.jsonl"
	// TrajectoriesFile holds the policy seats' trajectories (with
	// save_trajectories).
	TrajectoriesFile = "trajectories.jsonl"
	// AdapterFile is the LoRA adapter of the latest iteration.
	AdapterFile = "adapter.gguf"
	// CheckpointDir holds the trainer's and the run's checkpoint.
	CheckpointDir = "checkpoint"
	// EvalFile holds a line per held-out evaluation of the run; EvalDir
	// the arena's files of each (eval/iter-N/); BestDir the adapter of
	// the best evaluation so far.
	EvalFile = "eval.jsonl"
	EvalDir  = "eval"
	BestDir  = "best"
	// CompareDir holds the before-and-after comparison of a run.
	CompareDir = "compare"
	// LeagueDir holds the league's snapshots' adapters.
	LeagueDir = "league"
	// RewardPlot is the picture of the run's reward per role.
	RewardPlot = "reward.svg"
	// TensorBoardDir holds the TensorBoard event files where the command
	// line's --tensorboard puts them by default.
	TensorBoardDir = "tensorboard"
	// ClusterCacheDir is where in-process cluster workers keep the
	// adapters they download; ClusterStoreDir is the embedded NATS
	// server's storage.
	ClusterCacheDir = "cluster"
	ClusterStoreDir = "nats"
)

// All are the names above: what a fresh run started over a previous one
// (--overwrite) removes, and nothing else in the directory.
func All() []string {
	return []string{ConfigFile, ModelFile, MetricsFile, EpisodesFile, TrajectoriesFile, RewardPlot, AdapterFile, CheckpointDir,
		EvalFile, EvalDir, BestDir, LeagueDir, CompareDir, ClusterStoreDir, ClusterCacheDir, TensorBoardDir}
}
