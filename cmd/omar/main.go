// Command omar loads a local model through llama.cpp, lets that one model
// play every participant of multi-party conversations, scores them and
// trains the model with PPO in the same process.
//
// Every subcommand lives in its own file (cmd_<name>.go) and registers
// itself with register in an init function.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/term"

	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/interrupt"
)

// command is one subcommand. run receives the arguments after the
// subcommand's name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what a subcommand may touch of the process, so that commands
// can be tested without a terminal.
type cliEnv struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	// interactive reports whether stderr is a terminal (progress bars).
	interactive bool
	// flags is the command's flag set once it made one (newFlags), so
	// that runMain can print its usage: on -h in full, after a parse
	// error as one line with a suggestion.
	flags *flag.FlagSet
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("omar: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// isHelp reports whether args ask for a command's help rather than run it.
func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}

func main() {
	ctx := interrupt.Context(os.Stderr, "omar")
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, interactive: isTerminal(os.Stderr)}
	os.Exit(runMain(ctx, env, os.Args[1:]))
}

func runMain(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "omar: unknown command %q\n\n", args[0])
		usage(env.stderr)
		return 2
	}
	err := c.run(ctx, env, args[1:])
	return cliflag.Report(env.stderr, "omar "+c.name, env.flags, err)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: omar <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'omar <command> -h' for a command's flags.")
}

// newFlags returns a flag set for a subcommand that reports errors instead
// of exiting and prints its usage to env.stderr.
func newFlags(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("omar "+name, flag.ContinueOnError)
	// runMain prints the usage and the error: the flag package would dump
	// every flag after any mistake.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	env.flags = fs
	return fs
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
