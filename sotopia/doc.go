// Package sotopia is the SOTOPIA environment (env id "sotopia_v1"): two
// characters with private social goals meet in a scenario and act in
// alternating turns (speak, non-verbal communication, physical action, do
// nothing, leave) until a turn limit, a departure, or a run of silence.
//
// Scenarios and characters are YAML (strictly decoded and validated, with
// errors naming the file, line and field); the default content is embedded
// and was written for omar. The relationship of a scenario decides how much
// of the other character's profile each agent sees; a character's secret is
// shown only to its owner and each agent sees only its own goal.
//
// Scores come from a SOTOPIA-EVAL judge that reads the omniscient history.
// The environment imports no model code: it declares the Completer interface
// (prompt + grammar in, text out) and builds the judge prompts, the GBNF that
// forces the score JSON and the parser on top of it; package judge
// adapts an inference.Backend to it. Without a judge an episode ends
// "unjudged" with zero rewards (see docs/sotopia.md).
package sotopia
