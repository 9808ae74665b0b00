// Package recipes runs the research recipes that are loops over training
// runs: Cascade RL (one policy trained on one environment after another,
// optionally with SFT stages of the strategic script (package bc); each
// stage evaluated on the environments met so far and starting from the
// stage before's best evaluation, the paper's rule, or on every
// environment and from the best so far) and multi-teacher on-policy
// distillation (one student learns every environment from its specialist,
// on the reverse KL of the specialist's top-k logprobs, the environments
// drawn by gap-closed sampling).
//
// A recipe's stages and specialists are ordinary runs of package loop, in
// subdirectories of the recipe's, and resume as runs do; the recipe's own
// config is recorded in its directory (Config) so that a resumed recipe
// continues with the config it started with. recipes sits above loop and
// bc, and neither imports it.
package recipes
