package errclip

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	base := errors.New("base")
	for _, tc := range []struct {
		name    string
		msg     string
		wantCut bool
	}{
		{"short", "short", false},
		{"at the bound", strings.Repeat("x", MaxBytes-len(": base")), false},
		{"5 MB", strings.Repeat("y", 5<<20), true},
		{"multibyte at the cut", strings.Repeat("é", MaxBytes), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Clip(fmt.Errorf("%s: %w", tc.msg, base))
			msg := err.Error()
			if got := strings.Contains(msg, "cut)"); got != tc.wantCut {
				t.Errorf("got cut %v, want %v (%d bytes)", got, tc.wantCut, len(msg))
			}
			if len(msg) > MaxBytes+64 || !utf8.ValidString(msg) {
				t.Errorf("got a %d-byte message (valid UTF-8 %v), want at most about %d", len(msg), utf8.ValidString(msg), MaxBytes)
			}
			if !errors.Is(err, base) {
				t.Error("errors.Is no longer sees the wrapped error")
			}
		})
	}
	if Clip(nil) != nil {
		t.Error("Clip(nil) is not nil")
	}
}
