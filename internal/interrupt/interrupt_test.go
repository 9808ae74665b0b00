package interrupt

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptTwice runs a child process that waits on Context
// and then keeps working, as a training run finishing its update does:
// the first SIGINT cancels the context and says so, the second ends the
// process at once.
func TestInterruptTwice(t *testing.T) {
	if os.Getenv("OMAR_TEST_INTERRUPT_CHILD") == "1" {
		ctx := Context(os.Stdout, "prog")
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("cancelled")
		time.Sleep(time.Minute) // the update that a second interrupt cuts short
		fmt.Println("finished")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptTwice$")
	cmd.Env = append(os.Environ(), "OMAR_TEST_INTERRUPT_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	await := func(want string) (seen []string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child's output ended before %q; it wrote %q", want, seen)
				}
				if seen = append(seen, l); strings.Contains(l, want) {
					return seen
				}
			case <-timeout:
				t.Fatalf("no %q from the child in 30 s; it wrote %q", want, seen)
			}
		}
	}
	await("ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	seen := await("cancelled")
	if !strings.Contains(strings.Join(seen, "\n"), "prog: interrupt: stopping at the next safe point (again to quit at once)") {
		t.Errorf("the first interrupt was not announced: %q", seen)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain until the child exits
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exited with %v, want killed by the second SIGINT", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("child ended with %v, want killed by SIGINT", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the second interrupt took %v to end the child", d)
	}
}
