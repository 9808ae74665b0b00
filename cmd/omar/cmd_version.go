package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func init() {
	register(command{name: "version", summary: "print omar's version", run: func(ctx context.Context, env *cliEnv, args []string) error {
		rev := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					rev = " (" + s.Value[:12] + ")"
				}
			}
		}
		fmt.Fprintf(env.stdout, "omar %s%s %s/%s %s\n", version, rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
		return nil
	}})
}
