package export

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Format is an output format.
type Format string

const (
	// Parquet writes one row per input record (TrajectoryRow or EpisodeRow).
	Parquet Format = "parquet"
	// Chat writes Hugging Face chat JSONL: one ChatRow per seat of each
	// episode record.
	Chat Format = "chat"
)

// ParseFormat parses a format name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Parquet, Chat:
		return f, nil
	}
	return "", fmt.Errorf("export: unknown format %q (want %s or %s)", s, Parquet, Chat)
}

// Options configure Export.
type Options struct {
	// Format is the output format.
	Format Format
	// Kind is the kind of the input's records; "" detects it from the
	// first line.
	Kind Kind
	// RowGroupRows and RowGroupBytes bound a Parquet row group: it is
	// written out when it holds this many rows or about this many bytes of
	// values, whichever comes first. They bound the writer's memory.
	RowGroupRows  int
	RowGroupBytes int64
	// ProgressEvery is how many input records pass between calls of
	// Progress.
	ProgressEvery int
	// Progress, when non-nil, is called every ProgressEvery records and
	// once at the end.
	Progress func(Stats)
	// Warn, when non-nil, is told of a torn last line that was skipped
	// (Stats.TornLine has its number too).
	Warn func(error)
	// MaxLegal is the legal-replies setting of the policy whose
	// conversations a chat export writes (selfplay.Reply.MaxLegal: 0 the
	// default, -1 never), so each seat's messages are the prompt that
	// policy read.
	MaxLegal int
}

// Defaults fills unset fields.
func (o Options) Defaults() Options {
	if o.RowGroupRows == 0 {
		o.RowGroupRows = 4096
	}
	if o.RowGroupBytes == 0 {
		o.RowGroupBytes = 64 << 20
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 100
	}
	return o
}

// Validate checks the options.
func (o Options) Validate() error {
	if _, err := ParseFormat(string(o.Format)); err != nil {
		return err
	}
	if _, err := ParseKind(string(o.Kind)); err != nil {
		return err
	}
	switch {
	case o.RowGroupRows < 1:
		return fmt.Errorf("export: row group rows %d < 1", o.RowGroupRows)
	case o.RowGroupBytes < 1:
		return fmt.Errorf("export: row group bytes %d < 1", o.RowGroupBytes)
	case o.MaxLegal < -1:
		return fmt.Errorf("export: max legal %d: want -1 (never), 0 (the default) or a count", o.MaxLegal)
	case o.ProgressEvery < 1:
		return fmt.Errorf("export: progress every %d < 1", o.ProgressEvery)
	case o.Format == Chat && o.Kind == Trajectories:
		return errChatTrajectories
	}
	return nil
}

var errChatTrajectories = errors.New("export: chat JSONL is made from episode records; trajectories hold token ids, not text")

// Stats counts what an export read and wrote.
type Stats struct {
	Kind Kind
	// Records is the number of input records read.
	Records int
	// Rows is the number of output rows: Parquet rows or chat lines.
	Rows int
	// RowGroups is the number of Parquet row groups written.
	RowGroups int
	// TornLine is the number of a torn last line that was skipped (the
	// input's last line, without its newline and not valid JSON: a write
	// cut short by a full disk or a kill); 0 when there was none.
	TornLine int
}

// Summary says what an export in format read and wrote: records of their
// kind → rows (chat: conversations).
func (st Stats) Summary(format Format) string {
	what := "rows"
	if format == Chat {
		what = "conversations"
	}
	return fmt.Sprintf("%d %s → %d %s", st.Records, st.Kind, st.Rows, what)
}

// Export reads the JSONL records of in and writes them to out in
// opts.Format. A record that cannot be decoded or breaks its invariants
// stops the export with a *LineError naming its line — except a torn last
// line (a write cut short), which is skipped and reported through
// opts.Warn and Stats.TornLine, so that the records before it still
// export. out receives a complete file only when Export returns nil.
func Export(ctx context.Context, in io.Reader, out io.Writer, opts Options) (Stats, error) {
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return Stats{}, err
	}
	lr := newLineReader(in)
	st := Stats{Kind: opts.Kind}
	if st.Kind == "" {
		line, n, err := lr.peek()
		switch {
		case errors.Is(err, io.EOF):
			return st, errors.New("export: the input is empty: no kind to detect (name one)")
		case err != nil:
			return st, fmt.Errorf("export: read: %w", err)
		}
		if st.Kind, err = DetectKind(line); err != nil {
			if lr.torn(line) {
				st.TornLine = n
				return st, fmt.Errorf("export: the input is empty but for a torn last line %d (a write cut short): %w", n, err)
			}
			return st, fmt.Errorf("export: %w", &LineError{Line: n, Err: err})
		}
		if opts.Format == Chat && st.Kind == Trajectories {
			return st, fmt.Errorf("%w (line %d is a trajectory)", errChatTrajectories, n)
		}
	}
	var sink sink
	switch {
	case opts.Format == Chat:
		sink = newChatSink(out, opts.MaxLegal)
	case st.Kind == Trajectories:
		sink = newParquetSink(out, opts, &st, trajectoryRow)
	default:
		sink = newParquetSink(out, opts, &st, episodeRow)
	}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		line, n, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("export: read line %d: %w", n, err)
		}
		rows, err := sink.add(st.Records, line)
		if err != nil && lr.torn(line) {
			st.TornLine = n
			if opts.Warn != nil {
				opts.Warn(fmt.Errorf("export: line %d: skipped a torn last line (no newline: a write cut short): %w", n, err))
			}
			break
		}
		if err != nil {
			if k, derr := DetectKind(line); derr == nil && k != st.Kind {
				err = fmt.Errorf("%w (the line holds %s, not %s)", err, k, st.Kind)
			}
			return st, fmt.Errorf("export: %w", &LineError{Line: n, Err: err})
		}
		st.Records++
		st.Rows += rows
		if opts.Progress != nil && st.Records%opts.ProgressEvery == 0 {
			opts.Progress(st)
		}
	}
	if err := sink.close(); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(st)
	}
	return st, nil
}

// sink is an output format: add converts and writes the index-th record
// (one input line) and returns the number of rows it wrote.
type sink interface {
	add(index int, line []byte) (int, error)
	close() error
}

// convert decodes one input line into a Parquet row and estimates the
// bytes of its values (for sizing row groups).
type convert[T any] func(index int, line []byte) (T, int64, error)

func trajectoryRow(_ int, line []byte) (TrajectoryRow, int64, error) {
	t, err := DecodeTrajectory(line)
	if err != nil {
		return TrajectoryRow{}, 0, err
	}
	row, err := NewTrajectoryRow(&t)
	// Tokens, logprobs and raw logprobs take 4 bytes each, the mask 1.
	return row, int64(13*len(t.Tokens)) + 64, err
}

func episodeRow(index int, line []byte) (EpisodeRow, int64, error) {
	rec, err := DecodeRecord(line)
	if err != nil {
		return EpisodeRow{}, 0, err
	}
	row, err := NewEpisodeRow(index, &rec)
	// The JSON line is a fair measure of the values it holds.
	return row, int64(len(line)), err
}

// parquetSink writes rows of one type, flushing a row group whenever the
// rows or bytes since the last one reach the limits.
type parquetSink[T any] struct {
	w       *parquet.GenericWriter[T]
	conv    convert[T]
	opts    Options
	st      *Stats
	pending []T // rows converted but not yet handed to the writer
	rows    int // rows in the open row group
	bytes   int64
}

func newParquetSink[T any](out io.Writer, opts Options, st *Stats, conv convert[T]) *parquetSink[T] {
	w := parquet.NewGenericWriter[T](out,
		parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("omar export", "", ""),
		parquet.KeyValueMetadata("omar.kind", string(st.Kind)),
		parquet.KeyValueMetadata("omar.schema", schemaVersion),
	)
	return &parquetSink[T]{w: w, conv: conv, opts: opts, st: st}
}

// schemaVersion names the schema of docs/datasets.md in each file's
// metadata; it changes when a column changes.
const schemaVersion = "1"

// writeBatch is how many rows are handed to the writer at once: parquet-go
// writes column by column, so a batch amortises its per-call work.
const writeBatch = 64

func (s *parquetSink[T]) add(index int, line []byte) (int, error) {
	row, size, err := s.conv(index, line)
	if err != nil {
		return 0, err
	}
	s.pending = append(s.pending, row)
	s.rows++
	s.bytes += size
	if len(s.pending) >= writeBatch {
		if err := s.write(); err != nil {
			return 0, err
		}
	}
	if s.rows >= s.opts.RowGroupRows || s.bytes >= s.opts.RowGroupBytes {
		if err := s.flush(); err != nil {
			return 0, err
		}
	}
	return 1, nil
}

func (s *parquetSink[T]) write() error {
	if len(s.pending) == 0 {
		return nil
	}
	if _, err := s.w.Write(s.pending); err != nil {
		return fmt.Errorf("write parquet rows: %w", err)
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	return nil
}

func (s *parquetSink[T]) flush() error {
	if err := s.write(); err != nil {
		return err
	}
	if s.rows == 0 {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write parquet row group: %w", err)
	}
	s.st.RowGroups++
	s.rows, s.bytes = 0, 0
	return nil
}

func (s *parquetSink[T]) close() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	return nil
}

// chatSink writes one ChatRow line per seat of each episode record.
type chatSink struct {
	w        *bufio.Writer
	enc      *json.Encoder
	maxLegal int
}

func newChatSink(out io.Writer, maxLegal int) *chatSink {
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &chatSink{w: w, enc: enc, maxLegal: maxLegal}
}

func (s *chatSink) add(index int, line []byte) (int, error) {
	rec, err := DecodeRecord(line)
	if err != nil {
		return 0, err
	}
	rows := ChatRows(index, &rec, s.maxLegal)
	for i := range rows {
		if err := s.enc.Encode(&rows[i]); err != nil {
			return 0, fmt.Errorf("write chat line: %w", err)
		}
	}
	return len(rows), nil
}

func (s *chatSink) close() error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write chat lines: %w", err)
	}
	return nil
}
