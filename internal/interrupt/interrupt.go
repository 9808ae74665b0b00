// Package interrupt stops a long job in two steps: the first interrupt
// asks it to stop at its next safe point, the second ends the process.
package interrupt

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Context returns a context cancelled by the first interrupt or SIGTERM,
// which lets a job stop at its next safe point: a training run finishes
// the update in progress and writes its checkpoint, which for a large
// model can take minutes. The signal is announced on w as program's. The
// second signal gets the default action and ends the process at once; a
// job whose files are written atomically resumes from the last ones.
func Context(w io.Writer, program string) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		signal.Stop(sig) // no handler left: the next signal terminates
		fmt.Fprintf(w, "\n%s: %v: stopping at the next safe point (again to quit at once)\n", program, s)
		cancel()
	}()
	return ctx
}
