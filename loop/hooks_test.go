package loop

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/omar-selfplay/omar/runfiles"
)

// TestHooksChain: chained hooks run after the ones already set, a hook
// only one side sets still runs, and an unset one stays unset.
func TestHooksChain(t *testing.T) {
	var calls []string
	h := Hooks{
		Phase:     func(it int, p string) { calls = append(calls, "first phase "+p) },
		Iteration: func(m *runfiles.Metrics) { calls = append(calls, fmt.Sprint("first iteration ", m.Iteration)) },
	}
	h.Chain(Hooks{
		Phase:   func(it int, p string) { calls = append(calls, "next phase "+p) },
		Episode: func(it, done, total int) { calls = append(calls, fmt.Sprint("next episode ", done, "/", total)) },
	})
	h.Phase(4, "rollout")
	h.Episode(4, 2, 8)
	h.Iteration(&runfiles.Metrics{Iteration: 4})
	want := []string{"first phase rollout", "next phase rollout", "next episode 2/8", "first iteration 4"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("got %v, want %v", calls, want)
	}
	var empty Hooks
	empty.Chain(Hooks{})
	if empty.Phase != nil || empty.Episode != nil || empty.Iteration != nil {
		t.Error("chaining nothing onto nothing set a hook")
	}
}
