package eta

import (
	"testing"
	"time"
)

// TestLeft: unknown before a phase is measured, then the mean times of
// what is left: the current phase's remainder, the iteration's later
// phases, further iterations and evaluations.
func TestLeft(t *testing.T) {
	var e Estimator
	t0 := time.Unix(0, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	e.Enter("rollout", at(0))
	if _, ok := e.Left(at(5), 3, 1); ok {
		t.Fatal("an estimate before any phase was measured")
	}
	// Iteration 1: rollout 10 s, score 2 s, update 6 s, swap 2 s.
	e.Enter("score", at(10))
	e.Enter("update", at(12))
	e.Enter("swap", at(18))
	e.Finish(at(20))
	if left, ok := e.Left(at(20), 2, 0); !ok || left != 40*time.Second {
		t.Errorf("2 iterations of 20 s: %v, %v", left, ok)
	}
	if _, ok := e.Left(at(20), 2, 1); ok {
		t.Errorf("an evaluation counted before one was measured")
	}
	e.Enter(Eval, at(20))
	e.Finish(at(28))
	// Iteration 2, 4 s into its rollout: 6 s of rollout left, 10 s of
	// its other phases, one more iteration (20 s) and one evaluation (8 s).
	e.Enter("rollout", at(28))
	if left, ok := e.Left(at(32), 1, 1); !ok || left != 44*time.Second {
		t.Errorf("mid-rollout: %v, %v; want 44s", left, ok)
	}
	// A phase running over its mean adds nothing for itself.
	if left, ok := e.Left(at(60), 0, 0); !ok || left != 10*time.Second {
		t.Errorf("an overrun rollout: %v, %v; want 10s", left, ok)
	}
}
