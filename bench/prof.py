"""Profile the peers' runner workload (cProfile, 200 runs of 20 steps after 30 to warm up).

    PYTHONPATH=. python bench/prof.py [memory|transition|step] [SORT] [CALLERS_OF...]

SORT is a pstats key (`tottime` by default); TOP (environment) how many rows; with CALLERS_OF,
who calls each named function instead.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
from pathlib import Path

from bench.peers import runner_app


async def _runs(one_run: object, count: int) -> None:
    for _ in range(count):
        await one_run()  # type: ignore[operator]


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "memory"
    one_run = runner_app.make(
        None if mode == "memory" else mode, Path(tempfile.mkdtemp()), logging_="quiet"
    )
    asyncio.run(_runs(one_run, 30))
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(_runs(one_run, 200))
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats(argv[1] if len(argv) > 1 else "tottime")
    if len(argv) > 2:
        for name in argv[2:]:
            stats.print_callers(name)
    else:
        stats.print_stats(int(os.environ.get("TOP", "15")))


if __name__ == "__main__":
    main(sys.argv[1:])
