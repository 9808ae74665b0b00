package archtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCmdLines bounds the program's own code: what cmd/omar does beyond
// reading flags and printing belongs in the packages, where it is
// reusable and tested (docs/architecture.md).
const maxCmdLines = 2000

func TestCmdSize(t *testing.T) {
	files, err := filepath.Glob("../../cmd/omar/*.go")
	if err != nil || len(files) < 10 {
		t.Fatalf("found %d files in cmd/omar (%v)", len(files), err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
	}
	if lines > maxCmdLines {
		t.Errorf("cmd/omar has %d non-test lines, over %d: move what is not flags and printing into the packages", lines, maxCmdLines)
	}
}
