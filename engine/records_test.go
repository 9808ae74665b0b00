package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRecords(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "a.jsonl")
	os.WriteFile(good, []byte(`{"env":"x_v1","seed":1}`+"\n\n"+`{"env":"x_v1","seed":2}`+"\n"), 0o644)
	recs, err := LoadRecords(good)
	if err != nil || len(recs) != 2 || recs[1].Seed != 2 {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
	bad := filepath.Join(dir, "b.jsonl")
	os.WriteFile(bad, []byte(`{"env":"x_v1"}`+"\n"+`{"env":`+"\n"), 0o644)
	if _, err := LoadRecords(good, bad); err == nil || !strings.Contains(err.Error(), "b.jsonl:2") {
		t.Errorf("got %v, want an error naming b.jsonl:2", err)
	}
}
