// Package tensorboard writes scalar summaries as TensorBoard event files,
// so a run's curves open in TensorBoard (or any reader of its format)
// beside metrics.jsonl.
//
// The format: a file named events.out.tfevents.<seconds>.<host> holds
// TFRecords — a little-endian uint64 length, the masked CRC-32C of those
// 8 bytes, the record, and the masked CRC-32C of the record — each record
// one tensorflow.Event protocol buffer: wall_time (field 1, double), step
// (field 2, int64), and either file_version (field 3, "brain.Event:2", the
// first record) or a Summary (field 5) of values, each a tag (field 1)
// and a simple_value (field 2, float). The encoder is written here from
// that definition; it needs no protobuf library.
package tensorboard

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Writer appends scalar events to one event file. It is not safe for
// concurrent use.
type Writer struct {
	f    *os.File
	w    *bufio.Writer
	now  func() time.Time
	path string
}

// Create starts a new event file in dir (made if missing). TensorBoard
// reads every event file of a directory, so a resumed run writes a new
// one beside the old.
func Create(dir string) (*Writer, error) {
	return create(dir, time.Now)
}

func create(dir string, now func() time.Time) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	t := now()
	// The pid keeps two writers started in the same second apart.
	name := fmt.Sprintf("events.out.tfevents.%d.%s.%d", t.Unix(), host, os.Getpid())
	path := filepath.Join(dir, name)
	for i := 1; ; i++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			break
		}
		path = filepath.Join(dir, name+"."+strconv.Itoa(i))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f, w: bufio.NewWriter(f), now: now, path: path}
	var ev []byte
	ev = appendDouble(ev, 1, seconds(t))
	ev = appendBytes(ev, 3, []byte("brain.Event:2"))
	if err := w.record(ev); err != nil {
		f.Close()
		return nil, err
	}
	return w, w.Flush()
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalars writes one event at step holding every (tag, value), tags in
// sorted order. Non-finite values are written as they are (TensorBoard
// shows them as NaN or ±Inf).
func (w *Writer) Scalars(step int64, values map[string]float64) error {
	tags := make([]string, 0, len(values))
	for t := range values {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	var summary []byte
	for _, t := range tags {
		var v []byte
		v = appendBytes(v, 1, []byte(t))
		v = appendFloat(v, 2, float32(values[t]))
		summary = appendBytes(summary, 1, v)
	}
	var ev []byte
	ev = appendDouble(ev, 1, seconds(w.now()))
	ev = appendVarintField(ev, 2, uint64(step))
	ev = appendBytes(ev, 5, summary)
	if err := w.record(ev); err != nil {
		return err
	}
	return w.Flush()
}

// Flush writes buffered events to the file.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	ferr := w.Flush()
	if err := w.f.Close(); err != nil && ferr == nil {
		ferr = fmt.Errorf("tensorboard: %w", err)
	}
	return ferr
}

func (w *Writer) record(data []byte) error {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], maskedCRC(data))
	for _, b := range [][]byte{head[:], data, tail[:]} {
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("tensorboard: %w", err)
		}
	}
	return nil
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Protocol buffer wire encoding: a key is field<<3 | wire type.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendVarintField(b []byte, field int, v uint64) []byte {
	return appendVarint(appendVarint(b, uint64(field)<<3|wireVarint), v)
}

func appendDouble(b []byte, field int, v float64) []byte {
	b = appendVarint(b, uint64(field)<<3|wireFixed64)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

func appendFloat(b []byte, field int, v float32) []byte {
	b = appendVarint(b, uint64(field)<<3|wireFixed32)
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = appendVarint(b, uint64(field)<<3|wireBytes)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}
