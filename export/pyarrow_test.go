package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// pyarrowDump prints a Parquet file as pyarrow reads it: each column's
// Arrow type and nullability, and every row as JSON.
const pyarrowDump = `
import json, sys
import pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
print(json.dumps({
    "types": {f.name: str(f.type) for f in t.schema},
    "nullable": {f.name: f.nullable for f in t.schema},
    "rows": t.to_pylist(),
}))
`

// TestParquetPyarrow reads the exported files with pyarrow, the reader
// pandas and Hugging Face datasets use, and compares every value with what
// was written. It runs where pyarrow is installed.
func TestParquetPyarrow(t *testing.T) {
	if err := exec.Command("python3", "-c", "import pyarrow").Run(); err != nil {
		t.Skipf("pyarrow is not installed (python3 -c 'import pyarrow': %v); the Go reader tests still ran", err)
	}
	dir := t.TempDir()
	trajIn := jsonl(t, append(syntheticTrajectories(9), rolloutTrajectories(t)...))
	episodesIn, err := os.ReadFile(filepath.Join("testdata", "episodes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		in    []byte
		want  func(t *testing.T, in []byte) []any
		types map[string]string // column: Arrow type
	}{
		{"trajectories", trajIn, func(t *testing.T, in []byte) []any {
			var out []any
			for _, tr := range lines(t, in, DecodeTrajectory) {
				row, err := NewTrajectoryRow(&tr)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, row)
			}
			return out
		}, map[string]string{
			"seed": "uint64", "tokens": "list<element: int32>", "mask": "list<element: bool>",
			"logprobs": "list<element: float>", "turn_rewards": "list<element: double>",
			"turn_flags": "list<element: list<element: string>>",
		}},
		{"episodes", episodesIn, func(t *testing.T, in []byte) []any {
			var out []any
			for i, rec := range lines(t, in, DecodeRecord) {
				row, err := NewEpisodeRow(i, &rec)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, row)
			}
			return out
		}, map[string]string{"seed": "uint64", "rewards": "list<element: double>", "scenario": "string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file, _ := export(t, tc.in, Options{Format: Parquet, RowGroupRows: 4})
			path := filepath.Join(dir, tc.name+".parquet")
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("python3", "-c", pyarrowDump, path)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			if err != nil {
				t.Fatalf("pyarrow: %v\n%s", err, stderr.String())
			}
			var got struct {
				Types    map[string]string `json:"types"`
				Nullable map[string]bool   `json:"nullable"`
				Rows     []any             `json:"rows"`
			}
			dec := json.NewDecoder(bytes.NewReader(stdout))
			dec.UseNumber()
			if err := dec.Decode(&got); err != nil {
				t.Fatal(err)
			}
			for col, typ := range tc.types {
				// Contains: a pyarrow that reads large_string or large_list
				// reads the same values.
				if !strings.Contains(got.Types[col], typ) {
					t.Errorf("column %s: Arrow type %q, want %q", col, got.Types[col], typ)
				}
			}
			if got.Nullable["seed"] || got.Nullable["env"] {
				t.Errorf("required columns read as nullable: %v", got.Nullable)
			}
			want := tc.want(t, tc.in)
			if len(got.Rows) != len(want) {
				t.Fatalf("rows: got %d, want %d", len(got.Rows), len(want))
			}
			for i := range want {
				w := columns(reflect.ValueOf(want[i]))
				g, _ := got.Rows[i].(map[string]any)
				for col, wv := range w.(map[string]any) {
					if path, ok := sameValue(g[col], wv); !ok {
						t.Errorf("row %d column %s%s: pyarrow read %.200s, want %.200s", i, col, path, fmt.Sprint(g[col]), fmt.Sprint(wv))
					}
				}
				if len(g) != len(w.(map[string]any)) {
					t.Errorf("row %d: pyarrow read %d columns, want %d", i, len(g), len(w.(map[string]any)))
				}
			}
		})
	}
}

// columns turns a row struct into the generic value pyarrow's to_pylist
// gives for it: structs as maps keyed by their parquet column names,
// slices as lists, nil pointers and slices as null.
func columns(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return columns(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("parquet"), ",")
			m[name] = columns(v.Field(i))
		}
		return m
	case reflect.Slice:
		if v.IsNil() && v.Type().Elem().Kind() == reflect.Slice {
			return nil // only nested lists (turn_flags) are optional
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = columns(v.Index(i))
		}
		return out
	case reflect.Float32:
		return float64(float32(v.Float()))
	}
	return v.Interface()
}

// sameValue compares a value pyarrow read (decoded with UseNumber) with
// the written one; numbers compare by value. It returns where they differ.
func sameValue(got, want any) (string, bool) {
	switch w := want.(type) {
	case nil:
		return "", got == nil
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return "", false
		}
		for k, wv := range w {
			if p, ok := sameValue(g[k], wv); !ok {
				return "." + k + p, false
			}
		}
		return "", len(g) == len(w)
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return "", false
		}
		for i := range w {
			if p, ok := sameValue(g[i], w[i]); !ok {
				return "[" + strconv.Itoa(i) + "]" + p, false
			}
		}
		return "", true
	case string, bool:
		return "", got == want
	}
	n, ok := got.(json.Number)
	if !ok {
		return "", false
	}
	switch w := want.(type) {
	case float64:
		f, err := n.Float64()
		return "", err == nil && f == w
	default: // integers: exact, uint64 seeds included
		g, ok := new(big.Int).SetString(n.String(), 10)
		wi := new(big.Int)
		if u, isU := w.(uint64); isU {
			wi.SetUint64(u)
		} else {
			wi.SetInt64(reflect.ValueOf(w).Int())
		}
		return "", ok && g.Cmp(wi) == 0
	}
}
