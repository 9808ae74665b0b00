package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"
)

// DecodeStrict decodes one JSON value from r into v: unknown fields and
// trailing data are errors.
func DecodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty body")
		}
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// EventsQuery is a parsed GET /v1/episodes/{id}/events query.
type EventsQuery struct {
	// Seat is the seat whose view is read; -1 (no seat parameter) reads
	// the omniscient log (observer token only).
	Seat  int
	After int64
	Wait  time.Duration
}

// ParseEventsQuery parses seat, after (the cursor: the last sequence number
// the client has) and wait (seconds, bounded by maxWait).
func ParseEventsQuery(v url.Values, nSeats int, maxWait time.Duration) (EventsQuery, error) {
	q := EventsQuery{Seat: -1}
	if s := v.Get("seat"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= nSeats {
			return q, fmt.Errorf("seat %q is not a seat of this episode (0..%d)", s, nSeats-1)
		}
		q.Seat = n
	}
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, fmt.Errorf("after %q is not a cursor (a sequence number ≥ 0)", s)
		}
		q.After = n
	}
	q.Wait = 0
	if s := v.Get("wait"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f != f {
			return q, fmt.Errorf("wait %q is not a number of seconds ≥ 0", s)
		}
		d := time.Duration(f * float64(time.Second))
		if f > maxWait.Seconds() {
			d = maxWait
		}
		q.Wait = d
	}
	return q, nil
}
