package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/omar-selfplay/omar/envs"
	"strings"
	"text/tabwriter"
)

func init() {
	register(command{name: "envs", summary: "list the environments: ids, seats, scripted policies", run: runEnvs})
}

// envInfo is one environment as `omar envs --json` prints it.
type envInfo struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	Seats       []string   `json:"seats"`
	RewardRange [2]float64 `json:"reward_range"`
	Policies    []string   `json:"policies"`
}

func runEnvs(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "envs")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var infos []envInfo
	for _, g := range envs.All() {
		info := envInfo{ID: g.ID(), Description: g.Description()}
		seats, err := g.Seats(nil)
		if err != nil {
			return fmt.Errorf("%s: %w", g.ID(), err)
		}
		for _, s := range seats {
			name := s.Name
			if s.Role != "" && s.Role != s.Name {
				name += "(" + s.Role + ")"
			}
			info.Seats = append(info.Seats, name)
		}
		info.RewardRange[0], info.RewardRange[1] = g.RewardRange()
		for _, p := range g.Policies() {
			info.Policies = append(info.Policies, p.Name)
		}
		infos = append(infos, info)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	}
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSEATS\tREWARD\tPOLICIES\tDESCRIPTION")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t[%g, %g]\t%s\t%s\n", i.ID, strings.Join(i.Seats, " "), i.RewardRange[0], i.RewardRange[1], strings.Join(i.Policies, ","), i.Description)
	}
	return tw.Flush()
}
