package engine

import "testing"

func TestScriptedSpec(t *testing.T) {
	for _, tc := range []struct {
		in, agent, name string
		scripted        bool
	}{
		{"naive", "scripted:naive", "naive", false},
		{"scripted:naive", "scripted:naive", "naive", true},
		{"scripted", "scripted:scripted", "scripted", true},
		{"scriptedx", "scripted:scriptedx", "scriptedx", false},
		{"policy", "scripted:policy", "policy", false},
	} {
		if got := ScriptedAgent(tc.in); got != tc.agent {
			t.Errorf("ScriptedAgent(%q): got %q, want %q", tc.in, got, tc.agent)
		}
		if got := ScriptedName(tc.in); got != tc.name {
			t.Errorf("ScriptedName(%q): got %q, want %q", tc.in, got, tc.name)
		}
		if got := IsScripted(tc.in); got != tc.scripted {
			t.Errorf("IsScripted(%q): got %v, want %v", tc.in, got, tc.scripted)
		}
	}
}
