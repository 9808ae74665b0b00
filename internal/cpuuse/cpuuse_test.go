package cpuuse

import (
	"runtime"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		parse      func([]byte) (float64, bool)
		want       float64
		ok         bool
	}{
		{"machine", "cpu  4705 356 584 3699176 23060 0 277 0 0 0\ncpu0 1 2 3 4 5 6 7\n", machineIdle, (3699176 + 23060) / 100.0, true},
		{"no iowait", "cpu  4705 356 584 3699176\n", machineIdle, 0, false},
		{"not cpu", "intr 1 2 3 4 5 6\n", machineIdle, 0, false},
		{"garbage", "cpu  a b c d e f\n", machineIdle, 0, false},
		{"empty", "", machineIdle, 0, false},
		{"plain", "42 (omar) R 1 42 42 0 -1 4194304 100 0 0 0 250 31 0 0 20 0 3 0 1 2 3", processTime, 2.81, true},
		{"odd name", "42 (a) b (c) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 3 0 1 2 3", processTime, 0.1, true},
		{"short", "42 (omar) R 1 42", processTime, 0, false},
		{"no name", "42 omar R", processTime, 0, false},
	} {
		got, ok := c.parse([]byte(c.stat))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %g, %v; want %g, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestThreads(t *testing.T) {
	n := Usable()
	for _, c := range []struct {
		free float64
		want int
	}{
		{-1, 1}, {0, 1}, {1.49, 1}, {1.5, min(2, n)}, {1.9, min(2, n)}, {1e9, n},
	} {
		if got := Threads(c.free); got != c.want {
			t.Errorf("Threads(%g) = %d, want %d", c.free, got, c.want)
		}
	}
}

// TestFree spins one goroutine for the window: whatever else the machine
// does, the core this process kept busy counts as free for it.
func TestFree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := Read()
	if _, ok := s.Free(Read()); ok {
		t.Error("Free over a window of microseconds: ok")
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	free, ok := s.Free(Read())
	if !ok {
		t.Fatal("Free over 300 ms: not ok")
	}
	// At 100 ticks a second the window's own use is known to ±0.1 core.
	if free < 0.25 || free > float64(runtime.NumCPU())+0.3 {
		t.Errorf("free cores %g: want between 0.25 and %d", free, runtime.NumCPU())
	}
}
