package jsonl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	decode := func(l Line) error {
		var v struct {
			K int `json:"k"`
		}
		return json.Unmarshal(l.Bytes, &v)
	}
	for _, tc := range []struct {
		name     string
		in       string
		wantN    []int // lines f saw and accepted
		wantTorn int   // line number of a torn last line, 0 for none
		wantErr  string
	}{
		{name: "empty", in: ""},
		{name: "whole lines", in: "{\"k\":1}\n{\"k\":2}\n", wantN: []int{1, 2}},
		{name: "blank lines counted", in: "\n{\"k\":1}\n  \n{\"k\":2}\n", wantN: []int{2, 4}},
		{name: "complete last line without newline", in: "{\"k\":1}\n{\"k\":2}", wantN: []int{1, 2}},
		{name: "torn last line", in: "{\"k\":1}\n{\"k\":2}\n{\"k\":", wantN: []int{1, 2}, wantTorn: 3},
		{name: "bad middle line", in: "{\"k\":1}\n{\"k\":\n{\"k\":2}\n", wantErr: "x.jsonl:2: "},
		{name: "valid JSON last line f rejects is not torn", in: "{\"k\":1}\n{\"k\":\"s\"}", wantErr: "x.jsonl:2: "},
		{name: "too long", in: "{\"k\":1}\n{\"k\":1" + strings.Repeat(" ", 100) + "}\n", wantErr: "x.jsonl:2: a line longer than 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			torn, err := Read(strings.NewReader(tc.in), "x.jsonl", 64, func(l Line) error {
				if err := decode(l); err != nil {
					return err
				}
				got = append(got, l.N)
				return nil
			})
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one starting %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantN) {
				t.Errorf("got lines %v, want %v", got, tc.wantN)
			}
			switch {
			case tc.wantTorn == 0 && torn != nil:
				t.Errorf("got torn %v, want none", torn)
			case tc.wantTorn != 0 && (torn == nil || torn.Line != tc.wantTorn || !torn.Torn):
				t.Errorf("got torn %v, want line %d", torn, tc.wantTorn)
			case torn != nil && !strings.Contains(torn.Error(), "torn last line"):
				t.Errorf("got message %q, want it to say a torn last line was skipped", torn)
			}
		})
	}
}

func TestReadOffsets(t *testing.T) {
	in := "{\"a\":1}\n\n  {\"b\":2}\n"
	var offs []int64
	if _, err := Read(strings.NewReader(in), "x", 0, func(l Line) error {
		if got := in[l.Offset : l.Offset+int64(len(l.Bytes))]; got != string(l.Bytes) {
			return fmt.Errorf("offset %d holds %q, want %q", l.Offset, got, l.Bytes)
		}
		offs = append(offs, l.Offset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(offs) != "[0 11]" {
		t.Errorf("got offsets %v, want [0 11]", offs)
	}
}

func TestReadStopsOnCallerError(t *testing.T) {
	stop := errors.New("stop")
	_, err := Read(strings.NewReader("{}\n{}\n"), "x", 0, func(l Line) error { return stop })
	var le *LineError
	if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, stop) {
		t.Errorf("got %v, want a LineError at line 1 wrapping stop", err)
	}
}

// FuzzRead: whatever the input, Read neither panics nor hands f a blank
// line, and line numbers increase.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"", "{}\n", "{\"k\":1}\n{\"k", "\n\n{}", "null\n{}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		last := 0
		_, _ = Read(strings.NewReader(s), "x", 1024, func(l Line) error {
			if len(l.Bytes) == 0 || l.N <= last {
				t.Fatalf("got line %d %q after %d", l.N, l.Bytes, last)
			}
			last = l.N
			if !json.Valid(l.Bytes) {
				return errors.New("invalid")
			}
			return nil
		})
	})
}
