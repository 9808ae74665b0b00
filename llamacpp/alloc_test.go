package llamacpp

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
)

// TestNewContextAddressSpaceCap: under an address-space limit (ulimit -v)
// a ggml context too large for it is an error, not an abort in ggml_init.
// It runs in a child process, whose limit the parent keeps out of.
func TestNewContextAddressSpaceCap(t *testing.T) {
	if os.Getenv("LLAMACPP_TEST_ASCAP_CHILD") != "1" {
		if llamatest.LibDir() == "" {
			t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestNewContextAddressSpaceCap$", "-test.v")
		cmd.Env = append(os.Environ(), "LLAMACPP_TEST_ASCAP_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNewContextAddressSpaceCap") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	testLib(t)
	vm := vmSize(t)
	limit := vm + 256<<20
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	// A small context still works under the limit.
	c, err := NewContext(16, 1, 64, true)
	if err != nil {
		t.Fatalf("small context: %v", err)
	}
	c.Free()
	// 2^24 nodes with gradients need gigabytes of graph headers.
	if c, err := NewContext(1<<20, 1, 1<<24, true); err == nil {
		c.Free()
		t.Fatal("a context beyond the address-space limit: got no error")
	} else if !strings.Contains(err.Error(), "cannot map") {
		t.Errorf("got %v, want an error saying the process cannot map the memory", err)
	}
}

// vmSize is the process's address space now (VmSize), in bytes.
func vmSize(t *testing.T) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmSize in /proc/self/status")
	return 0
}
