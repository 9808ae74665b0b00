package seeds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// JSON is a seed as omar's JSON carries it: a decimal string. A browser's
// (and pandas') JSON numbers are doubles, which round integers above 2^53,
// so a seed read from a page or a dataset as a number deals another
// episode. It reads a JSON number too, as files written before it hold
// them.
type JSON uint64

// MarshalJSON writes s as a decimal string.
func (s JSON) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatUint(uint64(s), 10)), nil
}

// UnmarshalJSON reads a decimal string or a JSON number; null leaves s
// as it is, as encoding/json does for a number.
func (s *JSON) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	text := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return fmt.Errorf("seed %s: want an integer from 0 to 2^64-1, as a number or a decimal string", b)
	}
	*s = JSON(v)
	return nil
}

// Ptr is the optional seed p in its JSON form; nil stays nil.
func Ptr(p *uint64) *JSON {
	if p == nil {
		return nil
	}
	s := JSON(*p)
	return &s
}

// Uint64 is s as a plain seed; nil stays nil.
func (s *JSON) Uint64() *uint64 {
	if s == nil {
		return nil
	}
	v := uint64(*s)
	return &v
}
