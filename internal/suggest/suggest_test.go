package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"iterations", "episodes", "env", "estimator", "casino", "craigslist"}
	tests := []struct{ in, want string }{
		{"iteratons", "iterations"},
		{"episods", "episodes"},
		{"ENV", "env"},
		{"casnio", "casino"}, // adjacent swap
		{"craiglist", "craigslist"},
		{"zzzz", ""},
		{"e", ""}, // too short to guess from
		{"", ""},
	}
	for _, tc := range tests {
		if got := Closest(tc.in, names); got != tc.want {
			t.Errorf("Closest(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"é", "e", 1},
	}
	for _, tc := range tests {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q): got %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
