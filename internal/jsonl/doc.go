// Package jsonl writes and reads the project's JSON-lines files (episode
// records, trajectories, metrics, evaluation results) so that a crash or
// a full disk never costs more than the line being written.
//
// The Writer truncates a failed or short write back to the end of the
// last complete line, so the file never ends in a partial line; Read
// tells a torn last line (no newline: a write cut short by a writer that
// could not truncate, or by a kill) from a bad line in the middle, so
// that readers can skip the first with a warning and name the second by
// file and line.
package jsonl
