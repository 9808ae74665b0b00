package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/train"
)

// checkpoint writes the trainer's state with the run state as its caller
// blob (one atomic, checksummed file) and the adapter.
func (r *Run) checkpoint() error {
	if se, ok := r.est.(advantage.StatefulEstimator); ok {
		b, err := se.MarshalState()
		if err != nil {
			return err
		}
		r.state.Estimator = b
	}
	for _, f := range r.outputs() {
		n, err := fileSize(r.Path(f.name))
		if err != nil {
			return err
		}
		*f.bytes = n
	}
	b, err := json.Marshal(r.state)
	if err != nil {
		return err
	}
	return r.trainer.SaveCheckpoint(r.Path(runfiles.CheckpointDir), b)
}

// outputs are the append-only files and the lengths the state records.
func (r *Run) outputs() []struct {
	name  string
	bytes *int64
} {
	return []struct {
		name  string
		bytes *int64
	}{{runfiles.MetricsFile, &r.state.MetricsBytes}, {runfiles.EpisodesFile, &r.state.EpisodesBytes}, {runfiles.TrajectoriesFile, &r.state.TrajectoriesBytes}, {runfiles.EvalFile, &r.state.EvalBytes}}
}

// restore loads the last checkpoint: the trainer's state, the run state,
// the adapter into the inference backend, and cuts the output files back
// to what they held at the checkpoint. A file shorter than the checkpoint
// says is refused: it was cut or replaced after the checkpoint, and
// continuing would leave a hole in it.
func (r *Run) restore() error {
	b, err := r.trainer.LoadCheckpoint(r.Path(runfiles.CheckpointDir))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("resume: %s has no checkpoint: the run stopped before its first one (every %d iterations) was written — an interrupt, or a full disk — so there is nothing to continue from; free space if the disk is full and start it again with --overwrite", r.dir, r.opts.CheckpointEvery)
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.state); err != nil {
		return fmt.Errorf("resume: corrupt run state in the checkpoint of %s: %w", r.dir, err)
	}
	if len(r.state.Estimator) > 0 {
		se, ok := r.est.(advantage.StatefulEstimator)
		if !ok {
			return fmt.Errorf("resume: the checkpoint has estimator state but %s keeps none", r.est.Name())
		}
		if err := se.UnmarshalState(r.state.Estimator); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	for _, f := range r.outputs() {
		have, err := fileSize(r.Path(f.name))
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if have < *f.bytes {
			return fmt.Errorf("resume: %s has %d bytes but the checkpoint was written when it had %d: it was cut or replaced after the checkpoint; restore it, or start afresh with --overwrite", r.Path(f.name), have, *f.bytes)
		}
	}
	if r.state.Adapter {
		// The adapter file is renamed into place after trainer.ckpt, so a
		// crash between the two leaves an older adapter (or none) beside
		// the state just loaded: write it again from that state (the same
		// state gives the same bytes).
		adapter := r.Path(runfiles.CheckpointDir + "/" + train.AdapterFile)
		if err := r.trainer.SaveAdapter(adapter); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if _, err := r.swapper.SetAdapter(context.Background(), adapter, 1); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	r.versionOffset = r.state.Iteration - r.swapper.PolicyVersion()
	for _, f := range r.outputs() {
		if err := os.Truncate(r.Path(f.name), *f.bytes); err != nil && !(errors.Is(err, os.ErrNotExist) && *f.bytes == 0) {
			return fmt.Errorf("resume: %w", err)
		}
	}
	return nil
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// appendFile appends b, whole lines, to path. A failed or short write
// cuts the file back to its length before, so it never ends in a partial
// line (package jsonl).
func appendFile(path string, b []byte) error { return jsonl.AppendLines(path, b) }
