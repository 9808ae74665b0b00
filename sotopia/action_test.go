package sotopia

import (
	"strings"
	"testing"
)

func TestParseMove(t *testing.T) {
	tests := []struct {
		in      string
		want    Move
		wantErr string
	}{
		{"none", Move{Kind: ActNone}, ""},
		{"  leave \n", Move{Kind: ActLeave}, ""},
		{"speak: Hello there", Move{ActSpeak, "Hello there"}, ""},
		{`speak: "Hello there"`, Move{ActSpeak, "Hello there"}, ""},
		{`speak: ""`, Move{ActSpeak, `""`}, ""},
		{"speak: a: b", Move{ActSpeak, "a: b"}, ""},
		{"non-verbal: smiles", Move{ActNonVerbal, "smiles"}, ""},
		{"action: opens the window", Move{ActPhysical, "opens the window"}, ""},
		{"", Move{}, "empty reply"},
		{"hello", Move{}, "no action keyword"},
		{"shout: hey", Move{}, `unknown action "shout"`},
		{"speak:", Move{}, "needs a content"},
		{"speak: one\nspeak: two", Move{}, "single line"},
		{"Speak: hi", Move{}, "unknown action"},
		{"speak: caf\xe9", Move{ActSpeak, "caf\uFFFD"}, ""},
		{"speak: " + strings.Repeat("x", 11), Move{}, "at most 10"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseMove(tt.in, 10+len("opens the window"))
			if tt.in == "speak: "+strings.Repeat("x", 11) {
				got, err = ParseMove(tt.in, 10)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// FuzzParseMove: whatever parses renders back to text that parses to the
// same move, and never panics.
func FuzzParseMove(f *testing.F) {
	for _, s := range []string{"none", "leave", "speak: hi", `speak: "hi"`, "non-verbal: nods", "action: sits", "speak:", "x: y", "speak: a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMove(s, 600)
		if err != nil {
			return
		}
		again, err := ParseMove(m.String(), 600)
		if err != nil || again != m {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, m, m.String(), again, err)
		}
	})
}
