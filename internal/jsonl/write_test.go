package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullDisk is a file that accepts limit bytes and then fails like a full
// disk, keeping the part of the write that fitted.
type fullDisk struct {
	*os.File
	limit int64
}

func (d *fullDisk) Write(p []byte) (int, error) {
	off, err := d.Seek(0, 1)
	if err != nil {
		return 0, err
	}
	room := max(d.limit-off, 0)
	if int64(len(p)) <= room {
		return d.File.Write(p)
	}
	n, err := d.File.Write(p[:room])
	if err != nil {
		return n, err
	}
	return n, syscall.ENOSPC
}

type line struct {
	K int    `json:"k"`
	S string `json:"s"`
}

func TestWriterFullDisk(t *testing.T) {
	// Each line is {"k":N,"s":"xxxxxxxxxx"}\n.
	for _, tc := range []struct {
		name      string
		limit     int64
		flushEach bool
	}{
		{name: "nothing fits", limit: 0},
		{name: "mid first line", limit: 10},
		{name: "mid line, buffered", limit: 100},
		{name: "mid line, flushed per line", limit: 100, flushEach: true},
		{name: "far", limit: 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := NewWriter(&fullDisk{File: f, limit: tc.limit})
			var werr error
			for k := 0; k < 2000 && werr == nil; k++ {
				werr = w.Write(line{K: k, S: "xxxxxxxxxx"})
				if werr == nil && tc.flushEach {
					werr = w.Flush()
				}
			}
			if werr == nil {
				werr = w.Close()
			}
			if !errors.Is(werr, syscall.ENOSPC) {
				t.Fatalf("error = %v, want ENOSPC", werr)
			}
			if err := w.Write(line{}); err == nil {
				t.Error("write after a failure succeeded, want the sticky error")
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > 0 && got[len(got)-1] != '\n' {
				t.Errorf("file ends in a partial line: …%q", got[max(0, len(got)-30):])
			}
			if int64(len(got)) > tc.limit {
				t.Errorf("file has %d bytes, more than the %d the disk took", len(got), tc.limit)
			}
			var want strings.Builder
			for k := range strings.Count(string(got), "\n") {
				fmt.Fprintf(&want, "{\"k\":%d,\"s\":\"xxxxxxxxxx\"}\n", k)
			}
			if string(got) != want.String() {
				t.Errorf("file is not the first lines in order:\ngot  %q\nwant %q", got, want.String())
			}
			// A partial write keeps the lines it completed.
			if lineLen := int64(len("{\"k\":0,\"s\":\"xxxxxxxxxx\"}\n")); tc.flushEach && int64(len(got)) < tc.limit-2*lineLen {
				t.Errorf("file has %d bytes, want the complete lines within %d", len(got), tc.limit)
			}
		})
	}
}

func TestWriterStdout(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	for k := range 3 {
		if err := w.Write(line{K: k}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len() != 0 {
		t.Errorf("%d bytes written before Flush, want buffered", b.Len())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "{\"k\":0,\"s\":\"\"}\n{\"k\":1,\"s\":\"\"}\n{\"k\":2,\"s\":\"\"}\n"
	if got := b.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := w.WriteLine([]byte("{}\n{}")); err == nil {
		t.Error("a line with a newline was accepted")
	}
}

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		name, before, want string
		dropped            int64
	}{
		{name: "absent", before: "\x00absent", want: "{\"k\":9,\"s\":\"\"}\n"},
		{name: "empty", before: "", want: "{\"k\":9,\"s\":\"\"}\n"},
		{name: "complete", before: "{\"a\":1}\n", want: "{\"a\":1}\n{\"k\":9,\"s\":\"\"}\n"},
		{name: "torn tail", before: "{\"a\":1}\n{\"a\":2", want: "{\"a\":1}\n{\"k\":9,\"s\":\"\"}\n", dropped: 6},
		{name: "only a torn line", before: "{\"a\"", want: "{\"k\":9,\"s\":\"\"}\n", dropped: 4},
		{name: "long tail", before: "{}\n" + strings.Repeat("x", 10000), want: "{}\n{\"k\":9,\"s\":\"\"}\n", dropped: 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.jsonl")
			if tc.before != "\x00absent" {
				if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, dropped, err := Append(path)
			if err != nil {
				t.Fatal(err)
			}
			if dropped != tc.dropped {
				t.Errorf("dropped %d bytes, want %d", dropped, tc.dropped)
			}
			if err := w.Write(line{K: 9}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzAppend: whatever a file holds, appending leaves it as its
// complete lines plus the new one.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "{}\n", "{}\n{", "\n\n\nabc", strings.Repeat("y", 5000) + "\n" + strings.Repeat("z", 5000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, before []byte) {
		path := filepath.Join(t.TempDir(), "f.jsonl")
		if err := os.WriteFile(path, before, 0o644); err != nil {
			t.Fatal(err)
		}
		w, dropped, err := Append(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLine([]byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		keep := before[:bytes.LastIndexByte(before, '\n')+1]
		if want := string(keep) + "{}\n"; string(got) != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if dropped != int64(len(before)-len(keep)) {
			t.Errorf("dropped %d, want %d", dropped, len(before)-len(keep))
		}
	})
}
