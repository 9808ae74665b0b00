package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLine is the longest line Read accepts when given no limit: a
// trajectory of a million tokens is about 30 MB, so 256 MiB is ample and
// still bounds what one bad file can make a reader hold.
const MaxLine = 256 << 20

// Line is one non-blank line of a JSONL stream.
type Line struct {
	// N counts lines from 1, blank ones included: the line an editor shows.
	N int
	// Offset is the byte offset of the line's first byte.
	Offset int64
	// Bytes is the line without its newline and surrounding space; it is
	// valid only until the callback returns.
	Bytes []byte
	// Unterminated: the stream ended before this line's newline, so it is
	// the last line and may be a write cut short.
	Unterminated bool
}

// LineError is a line that could not be used, named by file and line.
type LineError struct {
	Name string // the file (or "-" for standard input)
	Line int
	// Torn: the line is the last, has no newline and is not valid JSON —
	// a write cut short — and the reader skipped it.
	Torn bool
	Err  error
}

func (e *LineError) Error() string {
	if e.Torn {
		return fmt.Sprintf("%s:%d: skipped a torn last line (no newline: a write cut short): %v", e.Name, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Read calls f with each non-blank line of r in order. An error from f
// stops the read and comes back as a *LineError naming name and the line
// — except on an unterminated last line that is not even valid JSON,
// which is a write cut short: Read
// skips it and returns it as torn (a *LineError with Torn set) beside a
// nil error, for the caller to warn about. A complete last line without
// its newline (a file written by hand) is used like any other. A line
// longer than maxLine bytes (≤ 0: MaxLine) is an error.
func Read(r io.Reader, name string, maxLine int, f func(Line) error) (torn *LineError, err error) {
	if maxLine <= 0 {
		maxLine = MaxLine
	}
	br := bufio.NewReaderSize(r, 1<<16)
	var off int64
	var buf []byte
	for n := 1; ; n++ {
		buf = buf[:0]
		var rerr error
		for {
			chunk, err := br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if len(buf) > maxLine+1 {
				return nil, &LineError{Name: name, Line: n, Err: fmt.Errorf("a line longer than %d bytes", maxLine)}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				rerr = err
				break
			}
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, n, rerr)
		}
		eof := rerr != nil
		if t := bytes.TrimSpace(buf); len(t) > 0 {
			l := Line{N: n, Offset: off + int64(len(buf)-len(bytes.TrimLeft(buf, " \t\r\n"))), Bytes: t, Unterminated: eof}
			if ferr := f(l); ferr != nil {
				le := &LineError{Name: name, Line: n, Err: ferr}
				if eof && !json.Valid(t) {
					le.Torn = true
					return le, nil
				}
				return nil, le
			}
		}
		off += int64(len(buf))
		if eof {
			return nil, nil
		}
	}
}

// ReadFile is Read on the file at path.
func ReadFile(path string, maxLine int, f func(Line) error) (torn *LineError, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return Read(fh, path, maxLine, f)
}

// AppendLine appends line and its newline to the file at path (created
// when absent) in one write. A failed or short write is cut back to the
// file's length before, so the file never ends in a partial line; a torn
// line left by an earlier writer is cut off first.
func AppendLine(path string, line []byte) error {
	w, _, err := Append(path)
	if err != nil {
		return err
	}
	if err := w.WriteLine(line); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
