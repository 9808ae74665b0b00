// Package export turns omar's JSONL outputs into files that dataset tools
// load: episode records (engine.Record, episodes.jsonl) and trajectories
// (selfplay.Trajectory, trajectories.jsonl) become Parquet with one row per
// record, and episode records also become Hugging Face chat JSONL with one
// conversation per seat, holding only what that seat saw and said.
//
// Inputs are streamed: one line is decoded at a time, strictly (unknown
// fields and broken invariants are errors that name the line), and Parquet
// rows are written in bounded row groups, so a file of any size is
// exported in constant memory. The schemas are in docs/datasets.md; the
// row types here (EpisodeRow, TrajectoryRow, ChatRow) are those schemas,
// and their conversion functions go both ways so that a Go reader gets the
// original records back.
package export
