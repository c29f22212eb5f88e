"""Instructions per step under callgrind: a figure a noisy machine cannot blur.

    python -m bench.instructions CHECKOUT [CHECKOUT ...] [--mode memory|step|transition]
                                 [--runs N]

For each checkout, two processes run the peers' runner workload under `valgrind
--tool=callgrind` from that checkout (its `runner` first on the path), warmed up the same way:
one then runs `--runs` more runs, the other none. The difference in instructions, divided by the
steps of those runs, is what a step costs: imports, warm-up and valgrind's own start cancel out.
The hash seed is fixed so that both processes lay their dicts and sets out alike. Prints each
checkout's instructions per step and its ratio to the first checkout's.

Needs valgrind; about a minute a checkout in memory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peers.common import STEPS, positive_int
from bench.peers.measure import MODES, factory

WARM_UP_RUNS = 10
_TOTAL = re.compile(r"^summary:\s+(\d+)", re.MULTILINE)


def _play(mode: str, runs: int) -> None:
    """Inside valgrind: warm up, then play `runs` runs of the workload."""
    durability = None if mode == "memory" else mode

    async def play(one_run: object) -> None:
        for _ in range(WARM_UP_RUNS + runs):
            await one_run()  # type: ignore[operator]

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(play(factory("runner")(durability, Path(folder))))


def _instructions(checkout: str, mode: str, runs: int) -> int:
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}/callgrind.out",
                sys.executable,
                __file__,  # this file, whichever checkout is measured (it need not have it)
                "--play",
                mode,
                str(runs),
            ],
            cwd=checkout,
            env=dict(os.environ, PYTHONPATH=checkout, PYTHONHASHSEED="0"),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: callgrind failed:\n{done.stderr[-3000:]}")
        found = _TOTAL.search(Path(out, "callgrind.out").read_text())
        if found is None:
            raise SystemExit(f"{checkout}: no summary line in callgrind's output")
        return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--play"]:
        _play(argv[1], int(argv[2]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("checkouts", nargs="+", metavar="CHECKOUT")
    parser.add_argument("--mode", choices=MODES, default="memory")
    parser.add_argument("--runs", type=positive_int, default=20, help="default 20")
    args = parser.parse_args(argv)
    first: float | None = None
    for checkout in args.checkouts:
        if not (Path(checkout) / "bench" / "peers" / "measure.py").is_file():
            parser.error(f"{checkout}: not a checkout of this project (no bench/peers/measure.py)")
        more = _instructions(checkout, args.mode, args.runs)
        base = _instructions(checkout, args.mode, 0)
        per_step = (more - base) / (args.runs * STEPS)
        first = per_step if first is None else first
        ratio = per_step / first
        print(f"{args.mode:10s} {per_step:10,.0f} instructions/step  {ratio:.3f}  {checkout}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
