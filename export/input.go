package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// Kind is the kind of records an input file holds.
type Kind string

const (
	// Episodes are engine.Record lines (episodes.jsonl).
	Episodes Kind = "episodes"
	// Trajectories are selfplay.Trajectory lines (trajectories.jsonl).
	Trajectories Kind = "trajectories"
)

// ParseKind parses a kind name; "" means "detect from the first line".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case "", Episodes, Trajectories:
		return k, nil
	}
	return "", fmt.Errorf("export: unknown input kind %q (want %s or %s)", s, Episodes, Trajectories)
}

// LineError is an input line that could not be used. Line counts from 1
// and includes blank lines, so it is the line an editor shows.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// torn reports whether line, just returned by lr, is a write cut short:
// the stream's last line, without its newline, and not even valid JSON.
func (lr *lineReader) torn(line []byte) bool { return lr.unterminated && !json.Valid(line) }

// DetectKind tells from one line which kind of record it is: a trajectory
// has tokens and a mask, an episode record has seats and events.
func DetectKind(line []byte) (Kind, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", err)
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := fields[n]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("tokens", "mask"):
		return Trajectories, nil
	case has("seats", "events"):
		return Episodes, nil
	}
	return "", errors.New("neither an episode record (no seats and events) nor a trajectory (no tokens and mask)")
}

// lineReader yields the non-blank lines of a JSONL stream with their line
// numbers. Lines may be of any length (a trajectory line can hold a
// million tokens).
type lineReader struct {
	r    *bufio.Reader
	line int
	// peeked is a line read ahead by peek, returned by the next call.
	peeked    []byte
	peekedAt  int
	hasPeeked bool
	// unterminated: the line last returned ended the stream without its
	// newline (it may be a write cut short).
	unterminated, peekedUnterminated bool
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: bufio.NewReaderSize(r, 1<<16)} }

// next returns the next non-blank line and its number, or io.EOF.
func (lr *lineReader) next() ([]byte, int, error) {
	if lr.hasPeeked {
		lr.hasPeeked = false
		lr.unterminated = lr.peekedUnterminated
		return lr.peeked, lr.peekedAt, nil
	}
	for {
		b, err := lr.r.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			return nil, lr.line, err
		}
		lr.line++
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, lr.line, err
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			lr.unterminated = err != nil
			return t, lr.line, nil
		}
		if err != nil {
			return nil, lr.line, err
		}
	}
}

// peek returns the next non-blank line without consuming it.
func (lr *lineReader) peek() ([]byte, int, error) {
	b, n, err := lr.next()
	if err != nil {
		return nil, n, err
	}
	lr.peeked, lr.peekedAt, lr.hasPeeked, lr.peekedUnterminated = b, n, true, lr.unterminated
	return b, n, nil
}

// decodeStrict decodes exactly one JSON value from line into v: unknown
// fields and trailing data are errors. Untyped values (scenarios, event
// payloads, deal terms) keep their numbers exactly as written.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object (one record per line)")
	}
	return nil
}

// DecodeTrajectory decodes and validates one trajectories.jsonl line.
func DecodeTrajectory(line []byte) (selfplay.Trajectory, error) {
	var t selfplay.Trajectory
	if err := decodeStrict(line, &t); err != nil {
		return t, fmt.Errorf("trajectory: %w", err)
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	return t, nil
}

// DecodeRecord decodes and checks one episodes.jsonl line: the seats are
// numbered 0, 1, … in order and the outcome has one reward per seat.
func DecodeRecord(line []byte) (engine.Record, error) {
	var r engine.Record
	// Record's own UnmarshalJSON would drop decodeStrict's settings.
	aux := struct {
		*recordFields
		Seed seeds.JSON `json:"seed"`
	}{recordFields: (*recordFields)(&r)}
	if err := decodeStrict(line, &aux); err != nil {
		return r, fmt.Errorf("episode record: %w", err)
	}
	r.Seed = uint64(aux.Seed)
	if err := validateRecord(&r); err != nil {
		return r, fmt.Errorf("episode record: %w", err)
	}
	return r, nil
}

// recordFields is engine.Record without its JSON methods.
type recordFields engine.Record

// validateRecord is engine.Record.Validate, and one reward per seat: a
// dataset row carries each seat's reward.
func validateRecord(r *engine.Record) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if len(r.Outcome.Rewards) != len(r.Seats) {
		return fmt.Errorf("%d rewards for %d seats", len(r.Outcome.Rewards), len(r.Seats))
	}
	return nil
}
