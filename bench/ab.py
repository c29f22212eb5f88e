"""A/B the peers' runner workload between two checkouts, alternating processes.

    python -m bench.ab BASE_CHECKOUT NEW_CHECKOUT [memory|step|transition ...] [--rounds N]

Each process runs `bench.peers.measure runner MODE` from its checkout's directory with that
checkout first on the path (so it imports that checkout's `runner`, whatever is installed);
prints the CPU µs/step medians, NEW/BASE, and every round's figure. Trust the ratio over the
absolute figures on a shared machine, and repeat when in doubt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def _measure(checkout: str, mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "bench.peers.measure", "runner", mode],
        cwd=checkout,
        env=dict(os.environ, PYTHONPATH=checkout),
        capture_output=True,
        text=True,
        check=True,
    )
    figure: float = json.loads(done.stdout.strip().splitlines()[-1])["us_per_step"]["cpu"]
    return figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("modes", nargs="*", default=["memory"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    for mode in args.modes:
        got: dict[str, list[float]] = {args.base: [], args.new: []}
        for _ in range(args.rounds):
            for checkout in (args.base, args.new):
                got[checkout].append(_measure(checkout, mode))
        base, new = (statistics.median(got[c]) for c in (args.base, args.new))
        print(
            f"{mode:10s} base {base:7.1f}  new {new:7.1f}  new/base {new / base:.3f}   "
            f"(base {sorted(round(x) for x in got[args.base])}, "
            f"new {sorted(round(x) for x in got[args.new])})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
