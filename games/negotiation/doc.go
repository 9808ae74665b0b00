// Package negotiation holds what the six bargaining games of omar's
// negotiation suite (docs/mission.md §3) really share: the move protocol a model
// writes (SAY / PROPOSE / ACCEPT / REJECT / WALK) with its parser and GBNF
// grammar, the alternating-offers episode loop on the engine runtime, the
// reward formulas (calibrated sigmoid, price corridor, calendar min-max),
// allocation maths (Pareto-optimal and envy-free references), scripted
// policies driven by a per-seat valuation, curated-scenario loading and
// the text heuristics of the behaviour metrics (disclosure, commitment
// language, fabricated numbers).
//
// Each game lives in its own package (games/dealornodeal, games/casino, …)
// and supplies only its terms, scenario, briefing, scoring and valuation;
// its engine.Game is a Game filled with those (the suite's Params, curated
// or sampled scenarios, fixed seats, the three scripted policies). Package
// negotiationtest holds the checks every game's tests share.
package negotiation
