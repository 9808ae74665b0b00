package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testRecord = `{"env":"x_v1","seed":%d,"seats":[{"index":0,"name":"a"}]}`

func rec(seed string) string { return strings.Replace(testRecord, "%d", seed, 1) }

func TestReadRecords(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("a.jsonl", rec("1")+"\n\n"+rec("2")+"\n")
	recs, err := LoadRecords(nil, good)
	if err != nil || len(recs) != 2 || recs[1].Seed != 2 {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"corrupt", rec("1") + "\n" + `{"env":` + "\n", "b.jsonl:2"},
		{"empty object", rec("1") + "\n{}\n" + rec("3") + "\n", "b.jsonl:2: not an episode record: no env"},
		{"null", "null\n" + rec("2") + "\n", "b.jsonl:1: not an episode record: no env"},
		{"no seats", `{"env":"x_v1"}` + "\n", "b.jsonl:1: not an episode record: no seats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := write("b.jsonl", tc.body)
			if _, err := LoadRecords(nil, good, bad); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("torn last line", func(t *testing.T) {
		torn := write("c.jsonl", rec("1")+"\n"+rec("2")+"\n"+`{"env":"x_v1","se`)
		if _, err := LoadRecords(nil, torn); err == nil || !strings.Contains(err.Error(), "c.jsonl:3: skipped a torn last line") {
			t.Errorf("without warn: got %v, want an error naming c.jsonl:3", err)
		}
		var warned []error
		recs, err := LoadRecords(func(err error) { warned = append(warned, err) }, torn)
		if err != nil || len(recs) != 2 {
			t.Fatalf("got %d records, %v; want 2 and no error", len(recs), err)
		}
		if len(warned) != 1 || !strings.Contains(warned[0].Error(), "c.jsonl:3") {
			t.Errorf("got warnings %v, want one naming c.jsonl:3", warned)
		}
	})
}

// TestRecordSeedJSON: a record's seed above 2^53 is written as an exact
// decimal string (a browser would round a number) and reads back; a
// record written with a numeric seed still reads.
func TestRecordSeedJSON(t *testing.T) {
	const big = uint64(18446744073709551315)
	r := Record{Env: "x_v1", Seed: big, Seats: []SeatRecord{{Seat: Seat{Name: "a <b>"}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"seed":"18446744073709551315"`) || strings.Count(string(b), `"seed"`) != 1 {
		t.Fatalf("record JSON %s: want one seed, as the string \"18446744073709551315\"", b)
	}
	if !strings.Contains(string(b), `a \u003cb\u003e`) {
		t.Errorf("json.Marshal's HTML escaping was lost: %s", b)
	}
	for _, line := range []string{string(b), rec("18446744073709551315"), rec(`"18446744073709551315"`)} {
		got, err := DecodeRecord([]byte(line))
		if err != nil || got.Seed != big {
			t.Errorf("%s: got %v, %v; want seed %d", line, got, err, big)
		}
	}
}
