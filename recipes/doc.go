// Package recipes runs the research recipes that are loops over training
// runs: Cascade RL (one policy trained on one environment after another,
// each stage from the best adapter so far, every environment evaluated
// after each stage so forgetting shows) and multi-teacher on-policy
// distillation (one student learns every environment from its specialist,
// on the reverse KL of the specialist's top-k logprobs, the environments
// drawn by gap-closed sampling).
//
// A recipe's stages and specialists are ordinary runs of package loop, in
// subdirectories of the recipe's, and resume as runs do; the recipe's own
// config is recorded in its directory (Config) so that a resumed recipe
// continues with the config it started with. recipes sits above loop and
// loop never imports it.
package recipes
