package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/export"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/parquet-go/parquet-go"
)

// TestExportPlayedEpisodes exports what omar play wrote, in both formats,
// and reads the files back.
func TestExportPlayedEpisodes(t *testing.T) {
	dir := t.TempDir()
	eps := filepath.Join(dir, "episodes.jsonl")
	if _, stderr, code := runCLI(t, "play", "--env", "casino", "--episodes", "3", "--seed", "4", "--out", eps); code != 0 {
		t.Fatalf("play: exit %d: %s", code, stderr)
	}
	pq := filepath.Join(dir, "episodes.parquet")
	_, stderr, code := runCLI(t, "export", "--in", eps, "--format", "parquet", "--out", pq, "--row-group-rows", "2")
	if code != 0 {
		t.Fatalf("export parquet: exit %d: %s", code, stderr)
	}
	if want := "3 episodes → 3 rows in " + pq; !strings.Contains(stderr, want) {
		t.Errorf("summary: got %q, want it to contain %q", stderr, want)
	}
	rows, groups := readBack[export.EpisodeRow](t, pq)
	if len(rows) != 3 || groups != 2 {
		t.Fatalf("parquet: got %d rows in %d row groups, want 3 in 2", len(rows), groups)
	}
	for i, r := range rows {
		if r.Env != "casino_v1" || len(r.Seats) != 2 || len(r.Events) == 0 || len(r.Rewards) != 2 || r.Index != int64(i) {
			t.Errorf("row %d: env %q, %d seats, %d events, %d rewards, index %d", i, r.Env, len(r.Seats), len(r.Events), len(r.Rewards), r.Index)
		}
	}

	chat := filepath.Join(dir, "chat.jsonl")
	if _, stderr, code := runCLI(t, "export", "--in", eps, "--format", "chat", "--out", chat); code != 0 {
		t.Fatalf("export chat: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(chat)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3*2 {
		t.Fatalf("chat: got %d lines, want one per seat of 3 episodes", len(lines))
	}
	var row export.ChatRow
	if err := json.Unmarshal([]byte(lines[1]), &row); err != nil {
		t.Fatal(err)
	}
	if row.Seat != 1 || row.Env != "casino_v1" || len(row.Messages) < 3 || row.Messages[0].Role != "system" || row.Messages[2].Role != "assistant" {
		t.Errorf("chat line 2: seat %d env %q messages %d (first %v)", row.Seat, row.Env, len(row.Messages), row.Messages[:1])
	}
}

// TestExportTrajectoriesFromStdin detects trajectories on standard input
// and writes Parquet to standard output.
func TestExportTrajectoriesFromStdin(t *testing.T) {
	tr := selfplay.Trajectory{
		Env: "sealedbid_v1", Scenario: "sealedbid_v1#0", Seat: 1, SeatName: "bidder2", Role: "bidder", Agent: "fake",
		Tokens: []int32{5, 6, 7, 8}, Mask: selfplay.Mask{false, false, true, true},
		Logprobs: []float32{0, 0, -0.5, -0.25}, RawLogprobs: []float32{0, 0, -0.4, -0.2},
		TurnEnds: []int{3}, TurnRewards: []float64{0}, Reward: 0.5, PolicyVersions: []int{2},
	}
	var in bytes.Buffer
	w := selfplay.NewTrajectoryWriter(&in)
	for range 3 {
		w.Write(&tr)
	}
	w.Flush()
	var out, errb bytes.Buffer
	code := runMain(t.Context(), &cliEnv{stdin: &in, stdout: &out, stderr: &errb}, []string{"export", "--in", "-", "--format", "parquet", "--out", "-"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	p := filepath.Join(t.TempDir(), "t.parquet")
	os.WriteFile(p, out.Bytes(), 0o644)
	rows, _ := readBack[export.TrajectoryRow](t, p)
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3", len(rows))
	}
	got := rows[2].Trajectory()
	if g, w := mustJSON(t, &got), mustJSON(t, &tr); !bytes.Equal(g, w) {
		t.Errorf("row 3: got %s, want %s", g, w)
	}
}

func TestExportErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	if _, stderr, code := runCLI(t, "play", "--env", "sealedbid", "--episodes", "2", "--out", good); code != 0 {
		t.Fatalf("play: exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(good)
	corrupt := filepath.Join(dir, "corrupt.jsonl")
	os.WriteFile(corrupt, append(b, []byte("{\"env\":\"sealedbid_v1\",\n")...), 0o644)
	existing := filepath.Join(dir, "existing.parquet")
	os.WriteFile(existing, []byte("keep me"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no input", []string{"--format", "chat", "--out", "x"}, 2, "no input"},
		{"no output", []string{"--in", good, "--format", "chat"}, 2, "no output"},
		{"no format", []string{"--in", good, "--out", "x"}, 2, "no format"},
		{"bad format", []string{"--in", good, "--out", "x", "--format", "csv"}, 2, `unknown format "csv"`},
		{"bad kind", []string{"--in", good, "--out", "x", "--format", "chat", "--kind", "logs"}, 2, `unknown input kind "logs"`},
		{"chat of trajectories", []string{"--in", good, "--out", "x", "--format", "chat", "--kind", "trajectories"}, 2, "trajectories hold token ids"},
		{"missing input", []string{"--in", filepath.Join(dir, "nope.jsonl"), "--out", "x", "--format", "chat"}, 1, "no such file"},
		{"corrupt line", []string{"--in", corrupt, "--out", existing, "--format", "parquet"}, 1, "line 3:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, append([]string{"export"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
	// The failed export left the existing file alone and no temporary file.
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("the failed export replaced %s: %q", existing, b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readBack reads a Parquet file's rows and counts its row groups.
func readBack[T any](t *testing.T, path string) ([]T, int) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	st, _ := file.Stat()
	f, err := parquet.OpenFile(file, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	rd := parquet.NewGenericReader[T](file)
	defer rd.Close()
	rows := make([]T, rd.NumRows())
	if n, _ := rd.Read(rows); n != len(rows) {
		t.Fatalf("read %d of %d rows", n, len(rows))
	}
	return rows, len(f.RowGroups())
}
