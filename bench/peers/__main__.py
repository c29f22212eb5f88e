"""`make bench-peers`: every system in its own process, alternating, several rounds; one table.

Each round runs every (system, mode) once, in an order rotated from round to round, each in a
fresh process (`bench.peers.measure`); a figure is the median over rounds of each process's
median µs per step (`--stat best`: the lowest round, which a noisy neighbour cannot raise).
Ratios are the peer's figure over the runner's in the same mode (how many times ahead the
runner is). Results (median and best) are also written to bench/peers-results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from .common import positive_int

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "peers-results.json"

BOTH = ("memory", "transition")
ROWS: list[tuple[str, str, tuple[str, ...]]] = [
    # (label, system, modes: memory and/or a durable one)
    ("runner (structlog configured quiet)", "runner", BOTH),
    ("runner, durability=step", "runner", ("step",)),
    ("runner with the library's default logging", "runner-default-logging", ("memory",)),
    ("Burr (prebuilt graph; SQLitePersister WAL/NORMAL)", "burr", BOTH),
    ("LangGraph (minimal graph; SqliteSaver, durability=sync)", "langgraph", BOTH),
    ("pydantic-ai (FunctionModel; no store of its own)", "pydantic-ai", ("memory",)),
    ("hand-written FSM, jsonschema-rs (floor): commit per transition", "floor", BOTH),
    ("hand-written FSM, jsonschema-rs (floor): commit per step", "floor", ("step",)),
]


def _measure(system: str, mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.peers.measure", system, mode],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE.parent.parent,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{system} {mode} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])["us_per_step"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    systems = sorted({system for _, system, _ in ROWS})
    parser.add_argument(
        "--rounds", type=positive_int, default=3, help="rounds of alternating processes (default 3)"
    )
    parser.add_argument(
        "--only", nargs="*", choices=systems, metavar="SYSTEM",
        help=f"systems to run (default: all): {', '.join(systems)}",
    )  # fmt: skip
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="rank by CPU time (default: steady on a shared machine) or wall-clock time",
    )
    parser.add_argument(
        "--stat",
        choices=("median", "best"),
        default="median",
        help="each figure as the median of the rounds (default) or the best round (as timeit "
        "advises: a neighbour on a shared machine only ever adds time)",
    )
    args = parser.parse_args(argv)
    wanted = {system for _, system, _ in ROWS if not args.only or system in args.only}
    jobs = sorted(
        {(system, mode) for _, system, modes in ROWS for mode in modes}
        & {(system, mode) for system in wanted for mode in ("memory", "transition", "step")}
    )
    samples: dict[tuple[str, str], list[dict[str, float]]] = {job: [] for job in jobs}
    for round_ in range(args.rounds):
        order = jobs[round_ % len(jobs) :] + jobs[: round_ % len(jobs)]
        for system, mode in order:
            figures = _measure(system, mode)
            samples[(system, mode)].append(figures)
            print(f"round {round_ + 1}: {system} {mode} {figures['cpu']:.1f} us/step CPU, "
                  f"{figures['wall']:.1f} wall", file=sys.stderr)  # fmt: skip
    summarize = statistics.median if args.stat == "median" else min
    figures_of = {
        job: [figures[args.clock] for figures in values] for job, values in samples.items()
    }
    chosen = {job: summarize(values) for job, values in figures_of.items()}
    _report(chosen, args.rounds, args.clock, args.stat)
    RESULTS.write_text(
        json.dumps(
            {f"{s} {m}": {f"median_us_per_step_{args.clock}": round(statistics.median(v), 1),
                          f"best_us_per_step_{args.clock}": round(min(v), 1),
                          "rounds": samples[(s, m)]}
             for (s, m), v in figures_of.items()},
            indent=2,
        ) + "\n"
    )  # fmt: skip
    print(f"\nwritten to {RESULTS}")
    return 0


def _cell(medians: dict[tuple[str, str], float], system: str, mode: str, base: str) -> str:
    figure = medians.get((system, mode))
    if figure is None:
        return "—"
    runner = medians.get(("runner", base))
    if runner is None or system.startswith("runner"):
        ratio = ""
    elif figure >= runner:
        ratio = f" ({figure / runner:.1f}x the runner)"
    else:
        ratio = f" (the runner is {runner / figure:.1f}x this)"
    return f"{figure:,.0f}{ratio}" if figure >= 20 else f"{figure:.1f}{ratio}"


def _report(medians: dict[tuple[str, str], float], rounds: int, clock: str, stat: str) -> None:
    kind = "CPU time" if clock == "cpu" else "wall-clock time"
    which = "median" if stat == "median" else "best"
    print(f"\n20-step runs, {which} µs/step ({kind}) over {rounds} rounds of alternating "
          "processes; ratios against the runner's figure in the same column\n")  # fmt: skip
    print("| system | in memory µs/step | durable µs/step, SQLite WAL/NORMAL |")
    print("|---|---|---|")
    for label, system, modes in ROWS:
        memory = _cell(medians, system, "memory", "memory") if "memory" in modes else "—"
        durable_mode = next((m for m in modes if m != "memory"), None)
        base = "step" if durable_mode == "step" else "transition"
        durable = "—" if durable_mode is None else _cell(medians, system, durable_mode, base)
        if (system, "memory") not in medians and (system, durable_mode) not in medians:
            continue
        print(f"| {label} | {memory} | {durable} |")


if __name__ == "__main__":
    sys.exit(main())
