"""The `runner` command: `run` fixture scenarios, `contracts check`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from . import log
from .contracts import ContractSet, default_contracts_dir, load_contracts, load_default_contracts
from .errors import LoadError, RunFailure
from .fixtures import collect_fixture_paths, load_fixture
from .policy import Policy
from .report import run_json, run_text
from .scenario import run_fixture
from .store import FanoutStore, JsonlStore, MemoryStore
from .store.base import Store
from .travel import SEMANTIC_RULES

EXIT_EXPECTATION_FAILED = 1
EXIT_BAD_INPUT = 2


def _contracts(directory: Path | None) -> ContractSet:
    if directory is None or directory.resolve() == default_contracts_dir():
        return load_default_contracts()
    return load_contracts(directory, SEMANTIC_RULES)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runner", description=__doc__)
    parser.add_argument(
        "--contracts", type=Path, default=None, help="contracts folder (default: the repository's)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run fixture scenarios and check their expectations")
    run.add_argument("paths", nargs="+", type=Path, help="fixture files or folders")
    run.add_argument(
        "--repeat", type=int, default=1, help="run each fixture N times from a clean state"
    )
    run.add_argument("--json", action="store_true", help="print one JSON object per run")
    run.add_argument(
        "--log", type=Path, default=None, help="append the transition log (JSONL) to FILE"
    )
    run.add_argument("--seed", type=int, default=0, help="seed for backoff jitter (default 0)")
    run.add_argument("--policy", type=Path, default=None, help="policy file (YAML or JSON)")
    run.add_argument("--verbose", action="store_true", help="log every transition to stderr")

    contracts = commands.add_parser("contracts", help="work with tool contracts")
    contract_commands = contracts.add_subparsers(dest="contracts_command", required=True)
    contract_commands.add_parser("check", help="compile every contract")
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise LoadError(f"--repeat must be at least 1, got {args.repeat}")
    contracts = _contracts(args.contracts)
    policy = Policy.load(args.policy) if args.policy else None
    fixtures = [load_fixture(path, contracts) for path in collect_fixture_paths(args.paths)]
    store: Store = MemoryStore()
    if args.log is not None:
        store = FanoutStore(store, JsonlStore(args.log))
    failed = passed = 0
    try:
        for fixture in fixtures:
            for index in range(1, args.repeat + 1):
                outcome = run_fixture(fixture, contracts, store, seed=args.seed, policy=policy)
                if args.json:
                    print(json.dumps(run_json(outcome), sort_keys=True))
                else:
                    print(run_text(outcome, index, args.repeat), end="\n\n")
                passed += outcome.passed
                failed += not outcome.passed
    finally:
        store.close()
    if not args.json:
        print(
            f"{len(fixtures)} fixtures x {args.repeat}: "
            f"{passed} runs met expectations, {failed} did not"
        )
    return EXIT_EXPECTATION_FAILED if failed else 0


def _check_contracts(args: argparse.Namespace) -> int:
    contracts = _contracts(args.contracts)
    print(f"ok: {len(contracts)} contracts compiled ({', '.join(sorted(contracts))})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    log.configure(level=10 if getattr(args, "verbose", False) else 30)
    try:
        if args.command == "run":
            return _run(args)
        return _check_contracts(args)
    except LoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RunFailure as exc:
        print(f"run failed: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
