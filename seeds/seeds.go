// Package seeds derives independent pseudo-random seeds from a run's seed
// and the coordinates of what consumes them (episode, seat, turn, tensor…),
// so that every random stream in omar is a pure function of one seed.
//
// It is a leaf: only the standard library, so that the engine, the
// environments, the tiny-model generator (package model) and the test
// helpers can all derive seeds the same way without importing each other.
// The mapping is part of every golden file and checkpoint: changing it
// changes every scenario, sampled reply and generated model.
package seeds

// Derive mixes seed with parts (episode, seat, turn…) into an independent
// seed. Order matters: Derive(s, 1, 2) and Derive(s, 2, 1) differ. Each part
// is folded in with a boost-style hash_combine and a splitmix64 finaliser,
// so nearby inputs give unrelated outputs.
func Derive(seed uint64, parts ...uint64) uint64 {
	x := seed
	for _, p := range parts {
		x ^= p + 0x9e3779b97f4a7c15 + (x << 6) + (x >> 2)
		x = mix64(x)
	}
	return mix64(x)
}

// mix64 is splitmix64's output function (Steele, Lea, Flood 2014).
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
