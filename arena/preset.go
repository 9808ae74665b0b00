package arena

import (
	"fmt"
	"slices"

	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/players"
)

// ProtocolPaper is the papers' evaluation protocol (docs/mission.md: 150
// games per environment): 10 curated scenarios × 3 opponents × 5 trials.
const ProtocolPaper = "paper"

// Protocols lists the names Preset knows.
var Protocols = []string{ProtocolPaper}

// paperOpponents are the protocol's three opponents: the negotiation
// games have two scripts that are not degenerate (random is), so the third
// counterpart is the base model, a model opponent as the papers had.
var paperOpponents = []string{"scripted:naive", "scripted:strategic", players.KindBase}

// paper's numbers: scenarios, trials of each.
const (
	paperScenarios = 10
	paperTrials    = 5
)

// Preset applies protocol name to c. ProtocolPaper sets 50 episodes per
// pairing (ScenarioCount 10: episode k plays curated scenario k mod 10,
// so each of the first 10 scenarios 5 times, with new sampling seeds
// each time), every environment's curated set, and the opponents
// scripted:naive, scripted:strategic and base: 150 games per player, side
// and environment. Values that contradict the protocol (other episodes,
// opponents or scenario count than the defaults, scenarios: seeds, an
// environment without a curated set of 10) are errors, not overridden.
// "" changes nothing.
func Preset(name string, c *Config) error {
	switch name {
	case "":
		return nil
	case ProtocolPaper:
	default:
		return fmt.Errorf("protocol %q: want one of %v", name, Protocols)
	}
	def := DefaultConfig()
	episodes := paperScenarios * paperTrials
	switch {
	case c.Episodes != def.Episodes && c.Episodes != episodes:
		return fmt.Errorf("protocol %s plays %d episodes per pairing; episodes %d given", name, episodes, c.Episodes)
	case c.ScenarioCount != 0 && c.ScenarioCount != paperScenarios:
		return fmt.Errorf("protocol %s plays %d scenarios; scenario_count %d given", name, paperScenarios, c.ScenarioCount)
	case !slices.Equal(c.Opponents, def.Opponents) && !slices.Equal(c.Opponents, paperOpponents):
		return fmt.Errorf("protocol %s sets the opponents %v; opponents %v given", name, paperOpponents, c.Opponents)
	}
	for i, e := range c.Envs {
		if e.Scenarios == ScenariosSeeds {
			return fmt.Errorf("protocol %s plays curated scenarios; env %s has scenarios: seeds", name, e.Name)
		}
		g := e.Game
		if g == nil {
			var err error
			if g, err = envs.Find(e.Name); err != nil {
				return err
			}
		}
		if _, curated := withCurated(g, e.Params); !curated {
			return fmt.Errorf("protocol %s: env %s has no curated scenario set", name, e.Name)
		}
		c.Envs[i].Scenarios = ScenariosCurated
	}
	c.Episodes, c.ScenarioCount = episodes, paperScenarios
	c.Opponents = slices.Clone(paperOpponents)
	return nil
}

// ApplyProtocol applies c.Protocol (Preset), else fits the default
// opponents to the environments (FitOpponents): what omar eval does once
// its config and flags are read.
func (c *Config) ApplyProtocol() error {
	if c.Protocol == "" {
		c.FitOpponents()
		return nil
	}
	return Preset(c.Protocol, c)
}
