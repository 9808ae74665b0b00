package main

import (
	"context"
	"encoding/json"

	"github.com/omar-selfplay/omar/envs"
)

func init() {
	register(command{name: "envs", summary: "list the environments: ids, seats, scripted policies", run: runEnvs})
}

func runEnvs(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "envs")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	entries, err := envs.Entries()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	return envs.WriteTable(env.stdout, entries)
}
