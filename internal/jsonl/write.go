package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Writer writes one JSON value per line (episode records, metrics,
// trajectories) so that the file never ends in a partial line: when a
// write fails or is cut short (a full disk, a quota, a signal between two
// writes), the file is truncated back to the end of the last complete
// line and the writer refuses further writes. Readers of an interrupted
// run then see whole lines only, and resuming can append after them.
//
// Lines are buffered (up to bufferSize bytes) and reach the file in
// whole lines on Flush, Close or a full buffer. Over a writer that cannot
// truncate (stdout, a pipe) lines are still written whole per call, but a
// failure cannot be undone.
type Writer struct {
	w   io.Writer
	f   truncater // nil when w cannot be truncated
	own io.Closer // closed by Close when the writer opened the file
	buf []byte
	// off is the size of the file's complete lines written so far.
	off int64
	err error
}

// truncater is what a file offers to undo a partial write.
type truncater interface {
	io.Writer
	io.Seeker
	Truncate(size int64) error
}

const bufferSize = 64 << 10

// NewWriter writes lines to w at its current offset. When w is a
// file (it has Seek and Truncate) a failed write is truncated away.
func NewWriter(w io.Writer) *Writer {
	jw := &Writer{w: w}
	if f, ok := w.(truncater); ok {
		if off, err := f.Seek(0, io.SeekCurrent); err == nil {
			jw.f, jw.off = f, off
		}
	}
	return jw
}

// Create creates (or empties) the file at path.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := NewWriter(f)
	w.own = f
	return w, nil
}

// Append opens the file at path for appending, creating it when
// absent. A trailing partial line (a crash mid-write by a writer that
// could not truncate) is cut off first; dropped is its length in bytes.
func Append(path string) (w *Writer, dropped int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, err
	}
	end, err := completeLinesEnd(f)
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			dropped = st.Size() - end
			if dropped > 0 {
				err = f.Truncate(end)
			}
		}
	}
	if err == nil {
		_, err = f.Seek(end, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("jsonl: append %s: %w", path, err)
	}
	w = NewWriter(f)
	w.own = f
	return w, dropped, nil
}

// completeLinesEnd returns the offset just past the file's last newline
// (0 when it has none).
func completeLinesEnd(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for end := st.Size(); end > 0; {
		start := max(0, end-int64(len(buf)))
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// Write appends v as one JSON line.
func (w *Writer) Write(v any) error {
	if w.err != nil {
		return w.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	return w.WriteLine(b)
}

// WriteLine appends line, which must be one JSON value without a newline.
func (w *Writer) WriteLine(line []byte) error {
	if w.err != nil {
		return w.err
	}
	if bytes.IndexByte(line, '\n') >= 0 {
		return errors.New("jsonl: line contains a newline")
	}
	w.buf = append(append(w.buf, line...), '\n')
	if len(w.buf) >= bufferSize {
		return w.Flush()
	}
	return nil
}

// Flush writes the buffered lines. On failure the file is truncated to
// the end of its last complete line (the lines of a partial write that
// made it whole are kept), and the error sticks.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.w.Write(w.buf)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("jsonl: %w", err)
		if i := bytes.LastIndexByte(w.buf[:max(n, 0)], '\n'); i >= 0 {
			w.off += int64(i) + 1
		}
		if w.f != nil {
			if terr := w.f.Truncate(w.off); terr != nil {
				w.err = fmt.Errorf("%w (and truncating back to byte %d: %v)", w.err, w.off, terr)
			} else if _, serr := w.f.Seek(w.off, io.SeekStart); serr != nil {
				w.err = fmt.Errorf("%w (and seeking back to byte %d: %v)", w.err, w.off, serr)
			}
		}
		w.buf = w.buf[:0]
		return w.err
	}
	w.off += int64(n)
	w.buf = w.buf[:0]
	return nil
}

// Close flushes and, when the writer opened the file, syncs it to disk
// (so that lines reported written survive a power loss) and closes it.
func (w *Writer) Close() error {
	err := w.Flush()
	if s, ok := w.own.(interface{ Sync() error }); ok && err == nil {
		err = s.Sync()
	}
	if w.own != nil {
		if cerr := w.own.Close(); err == nil {
			err = cerr
		}
		w.own = nil
	}
	return err
}

// AppendLines appends b, whole lines each ending in a newline, to the
// file at path in one write, as AppendLine does one.
func AppendLines(path string, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		return fmt.Errorf("jsonl: append %s: the lines do not end in a newline", path)
	}
	w, _, err := Append(path)
	if err != nil {
		return err
	}
	w.buf = append(w.buf, b...)
	return w.Close()
}
