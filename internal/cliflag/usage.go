package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ErrUsage marks errors after which a command's usage helps (exit status
// 2): a flag's value that does not parse or does not fit its field, a
// missing argument. It is a marker, not a message: wrap it last ("…: %w",
// as OptionFlags.Apply does) or build the error with Usage or Usagef, and
// Message leaves it out.
var ErrUsage = errors.New("usage")

// usageError is a usage error without the marker in its text.
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usage marks err as a usage error (errors.Is(err, ErrUsage)), its text
// unchanged.
func Usage(err error) error { return usageError{err} }

// Usagef formats a usage error.
func Usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Message is err's text for the user: without the trailing marker of
// errors wrapped as "…: %w", ErrUsage.
func Message(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+ErrUsage.Error())
}

// Report writes err, the error of the command name (the program's name
// and the command's: "omar eval"), to w and returns the process's exit
// status: 0 for a request for help (flag.ErrHelp), after fs's flags when
// the command made a flag set; 2 for a flag that does not parse (with the
// closest flag, Suggestion) and for a usage error; 1 for a failure.
func Report(w io.Writer, name string, fs *flag.FlagSet, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		if fs != nil {
			fmt.Fprintf(w, "Usage of %s:\n", name)
			Print(w, fs)
		}
		return 0
	case fs != nil && IsParseError(err):
		fmt.Fprintf(w, "%s: %s%s\nRun '%s -h' for its flags.\n", name, err, Suggestion(fs, err), name)
		return 2
	}
	fmt.Fprintf(w, "%s: %s\n", name, Message(err))
	if errors.Is(err, ErrUsage) {
		return 2
	}
	return 1
}
