package archtest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks fails on a relative link in README.md or docs/ whose file
// is missing, or whose #anchor names no heading of that file: moving a
// section (results go to docs/results/) must not leave a dangling link.
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(root, "README.md")}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	headings := func(p string) (map[string]bool, error) {
		if a, ok := anchors[p]; ok {
			return a, nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[p] = a
		return a, nil
	}
	var broken []string
	for _, f := range files {
		lines, err := linkTargets(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, l := range lines {
			target, line := l.target, l.line
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				if strings.HasPrefix(path, "/") {
					broken = append(broken, rel+":"+strconv.Itoa(line)+": absolute link "+target)
					continue
				}
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			st, err := os.Stat(dest)
			if err != nil {
				broken = append(broken, rel+":"+strconv.Itoa(line)+": "+target+": no such file")
				continue
			}
			if anchor == "" || st.IsDir() || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := headings(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !a[anchor] {
				broken = append(broken, rel+":"+strconv.Itoa(line)+": "+target+": no such heading")
			}
		}
	}
	sort.Strings(broken)
	for _, b := range broken {
		t.Errorf("broken link: %s", b)
	}
}

type link struct {
	target string
	line   int
}

// linkTargets returns the links of a Markdown file outside fenced code
// blocks and inline code.
func linkTargets(p string) ([]link, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []link
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		s := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(s), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		s = stripCode(s)
		for _, m := range mdLink.FindAllStringSubmatch(s, -1) {
			out = append(out, link{m[1], n})
		}
	}
	return out, sc.Err()
}

// stripCode drops inline code spans, whose brackets are not links.
func stripCode(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives a file's headings:
// lower case, punctuation dropped, spaces to hyphens, a repeated one
// suffixed -1, -2, ….
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, s := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(s), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(s, "#") {
			continue
		}
		h := strings.TrimLeft(s, "#")
		if h == "" || h[0] != ' ' {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestResultsIndex fails when a dated entry under docs/results/ has no
// line in docs/results/README.md, the one link the README gives to results.
func TestResultsIndex(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "results")
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "README.md" || !strings.HasSuffix(name, ".md") {
			continue
		}
		if !strings.Contains(string(index), "("+name+")") {
			t.Errorf("docs/results/%s is not listed in docs/results/README.md: add a line for it to the index", name)
		}
	}
}
