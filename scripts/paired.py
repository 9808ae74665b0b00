#!/usr/bin/env python3
"""Paired comparison of one player across two `omar eval` runs.

    scripts/paired.py NEW_DIR OLD_DIR [PLAYER]

Use it when the two sides cannot be players of one run: the same player
under different game parameters (the compact texts against the long ones,
which --params sets for every player of a run). Both runs must have played
the same environments, opponents and episode counts with the same --seed:
every pairing plays the same deal with the same sampling seed in its
episode k whatever the texts, so the results pair by (env, side, opponent,
episode). Prints, per cell, PLAYER's mean reward in each run, the paired
difference with a 95% bootstrap interval (2,000 resamples of the episodes),
and the mean over all cells the same way (resampled within each cell).
"""
import json
import random
import statistics as st
import sys


def load(d):
    out = {}
    with open(d + "/results.jsonl") as f:
        for line in f:
            r = json.loads(line)
            out[(r["env"], r["side"], r["player"], r["opponent"], r["episode"])] = r
    return out


def interval(cells, rng, n=2000):
    def mean(ds):
        return st.mean(st.mean(d) for d in ds)

    bs = sorted(mean([[rng.choice(d) for _ in d] for d in cells]) for _ in range(n))
    return mean(cells), bs[int(0.025 * n)], bs[int(0.975 * n) - 1]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    new, old = load(sys.argv[1]), load(sys.argv[2])
    player = sys.argv[3] if len(sys.argv) == 4 else "base"
    rng = random.Random(1)
    cells = {}
    for k, r in new.items():
        if k[2] != player:
            continue
        if k not in old:
            sys.exit(f"{sys.argv[2]} has no result for {k}: the runs did not play the same episodes")
        cells.setdefault(k[:2] + k[3:4], []).append((r["reward"], old[k]["reward"]))
    if not cells:
        sys.exit(f"no results of player {player!r} in {sys.argv[1]}")
    print("| env | side | opponent | new | old | paired difference (95% CI) |")
    print("|---|---|---|---|---|---|")
    diffs = []
    for c in sorted(cells):
        v = cells[c]
        d = [a - b for a, b in v]
        diffs.append(d)
        m, lo, hi = interval([d], rng)
        print(f"| {c[0]} | {c[1]} | {c[2]} | {st.mean(a for a, _ in v):.3f} | {st.mean(b for _, b in v):.3f} | {m:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
    m, lo, hi = interval(diffs, rng)
    print(f"| **all {len(cells)} cells** | | | | | **{m:+.3f} [{lo:+.3f}, {hi:+.3f}]** |")


if __name__ == "__main__":
    main()
