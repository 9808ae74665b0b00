// Package errclip bounds the length of an error's message. Errors about a
// config echo the value they refuse; a value of megabytes (a pasted file, a
// generated string) must not flood a terminal or a log line.
package errclip

import (
	"fmt"
	"unicode/utf8"
)

// MaxBytes is the longest message Clip lets through whole.
const MaxBytes = 1024

// Clip returns err with its message cut to MaxBytes (at a character
// boundary) and the number of bytes cut said; nil stays nil, and
// errors.Is/As still see err through the result.
func Clip(err error) error {
	if err == nil || len(err.Error()) <= MaxBytes {
		return err
	}
	return &clipped{err: err}
}

type clipped struct{ err error }

func (e *clipped) Error() string {
	msg := e.err.Error()
	n := MaxBytes
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d more bytes of the message cut)", msg[:n], len(msg)-n)
}

func (e *clipped) Unwrap() error { return e.err }
