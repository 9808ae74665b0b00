package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/internal/suggest"
)

// isFlagError reports whether err is the flag package's parse error: an
// unknown flag, a missing or malformed value.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: ", "flag needs an argument: ", "invalid value ", "invalid boolean value ", "bad flag syntax: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// suggestFlag returns ` (did you mean -NAME?)` for an unknown flag that is
// close to one of fs's, else "".
func suggestFlag(fs *flag.FlagSet, err error) string {
	const unknown = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, unknown) {
		return ""
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, unknown), "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := suggest.Closest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean --%s?)", best)
	}
	return ""
}
