package cluster

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/selfplay"
)

// names are the subjects, streams and bucket of one named run.
type names struct {
	work, results         string // subjects
	workStream, resStream string
	bucket                string
	workers, learner      string // durable consumers
}

func namesFor(name string) names {
	up := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	return names{
		work: "omar." + name + ".work", results: "omar." + name + ".results",
		workStream: "OMAR_" + up + "_WORK", resStream: "OMAR_" + up + "_RESULTS",
		bucket:  "OMAR_" + up,
		workers: "workers", learner: "learner",
	}
}

// Objects in the run's bucket.
const (
	infoObject  = "run.json"
	modelObject = "model.gguf"
)

func adapterObject(it int) string       { return "adapter-" + strconv.Itoa(it) + ".gguf" }
func snapshotObject(name string) string { return "league-" + name + ".gguf" }

// runInfo is the run.json object: what a worker needs to play the run.
type runInfo struct {
	// Incarnation changes each time a learner opens the run; work and
	// results of another incarnation are stale.
	Incarnation string `json:"incarnation"`
	// Config is the run's config.yaml.
	Config []byte `json:"config"`
	// ModelSHA256 is the hex digest of the model file (the model.gguf
	// object), ModelBytes its size.
	ModelSHA256 string `json:"model_sha256"`
	ModelBytes  int64  `json:"model_bytes"`
	// Label and Context are loop.Run.RemoteInfo.
	Label   string `json:"label"`
	Context int    `json:"context"`
}

// workItem is one work message: episodes first … first+n−1.
type workItem struct {
	Incarnation string `json:"incarnation"`
	Iteration   int    `json:"iteration"`
	First       int    `json:"first"`
	N           int    `json:"n"`
	// Cast maps an episode index (decimal) to its seats' agents.
	Cast map[string]map[int]string `json:"cast,omitempty"`
	// Adapter is the iteration whose adapter plays the episodes, in the
	// object AdapterObject ("": the model's own weights).
	Adapter       int    `json:"adapter"`
	AdapterObject string `json:"adapter_object,omitempty"`
	// Snapshots are the league snapshots the casts name.
	Snapshots []string `json:"snapshots,omitempty"`
}

// result is one played episode.
type result struct {
	Incarnation string `json:"incarnation"`
	Episode     int    `json:"episode"`
	// Adapter is the iteration whose adapter played it.
	Adapter int    `json:"adapter"`
	Worker  string `json:"worker"`
	// Record is the episode record's JSON, Trajectories the policy seats'.
	Record       json.RawMessage       `json:"record"`
	Trajectories []selfplay.Trajectory `json:"trajectories"`
	WallNS       int64                 `json:"wall_ns"`
	// Error, when set, is why the worker could not play the work item
	// (the run stops with it: a bug or a broken setup, not a game event).
	Error string `json:"error,omitempty"`
	// Stats are the counters of the work item, on its last episode.
	Stats *selfplay.Stats `json:"stats,omitempty"`
}

func msgID(incarnation string, episode, adapter int) string {
	return incarnation + "/" + strconv.Itoa(episode) + "/" + strconv.Itoa(adapter)
}
