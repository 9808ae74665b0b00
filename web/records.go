package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/seeds"
)

// RecordSummary is one record of a records file as the replay list shows
// it: no events, no scenario.
type RecordSummary struct {
	Index   int                 `json:"index"`
	Env     string              `json:"env"`
	Seed    seeds.JSON          `json:"seed"`
	Seats   []engine.SeatRecord `json:"seats"`
	Result  string              `json:"result"`
	Rewards []float64           `json:"rewards"`
	Events  int                 `json:"events"`
}

// Records is an episode-records file opened for replay. It keeps each
// line's offset and a summary, not the records: a record is read again
// from the file when it is asked for, so a large file costs little
// memory.
type Records struct {
	path string

	// mu guards what Append grows while the page reads.
	mu        sync.Mutex
	offsets   []int64
	summaries []RecordSummary
	bad       []BadLine
}

// BadLine is a line of a records file that holds no record: corrupt JSON,
// a `{}` or `null`, a record that breaks its invariants, or a torn last
// line (a write cut short). The page names it; the other records still
// load.
type BadLine struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
	// Torn: the last line, without its newline and not valid JSON.
	Torn bool `json:"torn,omitempty"`
}

// MaxRecordLine bounds one record's line (a Werewolf game of 15 seats is
// well under 1 MiB).
const MaxRecordLine = 64 << 20

// maxBadLines bounds the bad lines kept: a file of garbage names its
// first ones, not all of them.
const maxBadLines = 100

// OpenRecords indexes the records file at path. A line that holds no
// record is kept as a BadLine (Bad lists them) and skipped; reading the
// file can still fail (a line over MaxRecordLine, an I/O error).
func OpenRecords(path string) (*Records, error) {
	rs := &Records{path: path}
	skipped := 0
	torn, err := jsonl.ReadFile(path, MaxRecordLine, func(l jsonl.Line) error {
		rec, err := engine.DecodeRecord(l.Bytes)
		if err != nil {
			if json.Valid(l.Bytes) || !l.Unterminated {
				// Not torn: kept here rather than returned, so that the
				// lines after it still load.
				if len(rs.bad) < maxBadLines {
					rs.bad = append(rs.bad, BadLine{Line: l.N, Error: err.Error()})
				} else {
					skipped++
				}
				return nil
			}
			return err // the torn last line: jsonl.ReadFile skips it
		}
		rs.offsets = append(rs.offsets, l.Offset)
		rs.summaries = append(rs.summaries, summarize(len(rs.summaries), rec))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if torn != nil {
		rs.bad = append(rs.bad, BadLine{Line: torn.Line, Error: "a torn last line (no newline: a write cut short): " + torn.Err.Error(), Torn: true})
	}
	if skipped > 0 {
		rs.bad = append(rs.bad, BadLine{Error: fmt.Sprintf("and %d more bad lines", skipped)})
	}
	return rs, nil
}

// Bad lists the lines that hold no record (the first maxBadLines, then
// one entry counting the rest).
func (rs *Records) Bad() []BadLine {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.bad)
}

// readLine reads one line (with its newline) of at most MaxRecordLine
// bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > MaxRecordLine {
			return nil, fmt.Errorf("a line longer than %d bytes", MaxRecordLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return out, err
		}
	}
}

func summarize(i int, rec *engine.Record) RecordSummary {
	return RecordSummary{Index: i, Env: rec.Env, Seed: seeds.JSON(rec.Seed), Seats: rec.Seats, Result: rec.Outcome.Result,
		Rewards: rec.Outcome.Rewards, Events: len(rec.Events)}
}

// Len is the number of records.
func (rs *Records) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.offsets)
}

// Summaries lists the records.
func (rs *Records) Summaries() []RecordSummary {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.summaries)
}

// Append appends rec to the file as a line of its own and lists it (omar
// serve --save: the episodes played on the page join the replay list).
func (rs *Records) Append(rec *engine.Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	w, _, err := jsonl.Append(rs.path)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	// Append has cut a torn last line off: the file's size is where the
	// line starts (this process is its only writer, under rs.mu).
	var off int64
	st, err := os.Stat(rs.path)
	if err == nil {
		off = st.Size()
		err = w.WriteLine(line)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("web: save the record: %w", err)
	}
	rs.offsets = append(rs.offsets, off)
	rs.summaries = append(rs.summaries, summarize(len(rs.summaries), rec))
	return nil
}

// Record reads record i again from the file.
func (rs *Records) Record(i int) (*engine.Record, error) {
	rs.mu.Lock()
	n := len(rs.offsets)
	var off int64
	if i >= 0 && i < n {
		off = rs.offsets[i]
	}
	rs.mu.Unlock()
	if i < 0 || i >= n {
		return nil, fmt.Errorf("web: no record %d (the file has %d)", i, n)
	}
	f, err := os.Open(rs.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := readLine(bufio.NewReader(f))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	rec, err := engine.DecodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("web: %s record %d: %w (was the file rewritten?)", rs.path, i, err)
	}
	return rec, nil
}

// tailLines returns the last n complete, non-empty lines of the file at
// path, reading at most maxBytes from its end; a missing file has none.
func tailLines(path string, n int, maxBytes int64) ([][]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start := max(0, st.Size()-maxBytes)
	b := make([]byte, st.Size()-start)
	if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// A line being written has no newline yet; one cut by the window has
	// no start.
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return nil, nil
	}
	if start > 0 {
		i := bytes.IndexByte(b, '\n')
		b = b[i+1:]
	}
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}
