package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/seeds"
)

// Validate checks what every record the engine writes has: an env id, at
// least one seat, seats numbered 0, 1, … in order, no more rewards than
// seats (one each, or none) and events about seats that exist. It is what
// tells a stray `{}` or `null` line from a record.
func (r *Record) Validate() error {
	if r.Env == "" {
		return errors.New("not an episode record: no env")
	}
	if len(r.Seats) == 0 {
		return errors.New("not an episode record: no seats")
	}
	for i, s := range r.Seats {
		if s.Index != i {
			return fmt.Errorf("seat %d has index %d", i, s.Index)
		}
	}
	if n := len(r.Outcome.Rewards); n != 0 && n != len(r.Seats) {
		return fmt.Errorf("%d rewards for %d seats", n, len(r.Seats))
	}
	for i, e := range r.Events {
		if e.Seat < -1 || e.Seat >= len(r.Seats) {
			return fmt.Errorf("event %d (seq %d) is about seat %d of %d", i, e.Seq, e.Seat, len(r.Seats))
		}
	}
	return nil
}

// DecodeRecord decodes and validates one line of an episode-record file.
func DecodeRecord(line []byte) (*Record, error) {
	var rec Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, err
	}
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	return &rec, nil
}

// ReadRecords calls f with each record of the episode-record JSONL files
// at paths, in order, one record in memory at a time. A line that is not
// a record (corrupt JSON, `{}`, `null`) is an error naming its file and
// line; so is an error f returns. A torn last line (no newline, not JSON:
// a write cut short) is skipped and passed to warn; with warn nil it is an
// error too.
func ReadRecords(paths []string, warn func(error), f func(*Record) error) error {
	for _, path := range paths {
		torn, err := jsonl.ReadFile(path, 0, func(l jsonl.Line) error {
			rec, err := DecodeRecord(l.Bytes)
			if err != nil {
				return err
			}
			return f(rec)
		})
		if err != nil {
			return err
		}
		if torn != nil {
			if warn == nil {
				return torn
			}
			warn(torn)
		}
	}
	return nil
}

// LoadRecords reads every record of the files at paths into memory (see
// ReadRecords for warn).
func LoadRecords(warn func(error), paths ...string) ([]*Record, error) {
	var recs []*Record
	err := ReadRecords(paths, warn, func(r *Record) error { recs = append(recs, r); return nil })
	return recs, err
}

// recordFields is Record without its JSON methods.
type recordFields Record

// MarshalJSON writes r with its seed as a decimal string (seeds.JSON), so
// that a browser or a dataset tool reads the seed that dealt it, not a
// double near it.
func (r Record) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// The caller's encoder escapes HTML or not: the output is compacted
	// again with its setting.
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		*recordFields
		Seed seeds.JSON `json:"seed"`
	}{(*recordFields)(&r), seeds.JSON(r.Seed)})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// UnmarshalJSON reads a record whose seed is a decimal string or, as
// files written before MarshalJSON hold it, a number. It decodes as
// json.Unmarshal does: a reader with its own decoder settings (unknown
// fields, json.Number) decodes into a type of its own with Record's
// fields and a seeds.JSON seed.
func (r *Record) UnmarshalJSON(b []byte) error {
	aux := struct {
		*recordFields
		Seed seeds.JSON `json:"seed"`
	}{recordFields: (*recordFields)(r)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	r.Seed = uint64(aux.Seed)
	return nil
}
