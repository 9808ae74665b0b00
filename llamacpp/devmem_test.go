package llamacpp

import "testing"

// TestBackendMemory: the CPU device reports the host's memory, free at
// most total, and a nil backend is an error rather than a crash.
func TestBackendMemory(t *testing.T) {
	be, _ := cpuStatic(t)
	free, total, err := be.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if total <= 0 || free <= 0 || free > total {
		t.Errorf("got free %d, total %d; want 0 < free ≤ total", free, total)
	}
	if _, _, err := Backend(0).Memory(); err == nil {
		t.Error("nil backend: got no error")
	}
}
