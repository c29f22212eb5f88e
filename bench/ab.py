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
from pathlib import Path

from bench.peers.common import positive_int
from bench.peers.measure import MODES


def _measure(checkout: str, mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "bench.peers.measure", "runner", mode],
        cwd=checkout,
        env=dict(os.environ, PYTHONPATH=checkout),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: runner {mode} failed:\n{done.stderr[-3000:]}")
    figure: float = json.loads(done.stdout.strip().splitlines()[-1])["us_per_step"]["cpu"]
    return figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("base", help="the checkout to compare against")
    parser.add_argument("new", help="the checkout measured against it")
    parser.add_argument(
        "modes", nargs="*", metavar="MODE", help=f"{', '.join(MODES)} (default memory)"
    )
    parser.add_argument("--rounds", type=positive_int, default=5, help="default 5")
    args = parser.parse_args(argv)
    for mode in args.modes:
        if mode not in MODES:
            parser.error(f"mode {mode!r}: one of {', '.join(MODES)}")
    for checkout in (args.base, args.new):
        if not (Path(checkout) / "bench" / "peers" / "measure.py").is_file():
            parser.error(f"{checkout}: not a checkout of this project (no bench/peers/measure.py)")
    for mode in args.modes or ["memory"]:
        base_figures: list[float] = []
        new_figures: list[float] = []
        for _ in range(args.rounds):
            base_figures.append(_measure(args.base, mode))
            new_figures.append(_measure(args.new, mode))
        base, new = statistics.median(base_figures), statistics.median(new_figures)
        print(
            f"{mode:10s} base {base:7.1f}  new {new:7.1f}  new/base {new / base:.3f}   "
            f"(base {sorted(round(x) for x in base_figures)}, "
            f"new {sorted(round(x) for x in new_figures)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
