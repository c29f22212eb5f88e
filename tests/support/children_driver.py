"""Run or resume a parent-and-child family in this process, for the children's crash sweep:
`python -m tests.support.children_driver run FAMILY DB WORLD` prints the parent's run id (the kill
point, `RUNNER_KILL_AFTER_COMMITS`, may end it first); `... resume FAMILY DB WORLD RUN_ID`
resumes the parent (and through it every child) with fresh engines."""

from __future__ import annotations

import sys
from pathlib import Path

from runner import SqliteStore
from tests.support.children_world import load_family, resume_family, run_family


def main(argv: list[str]) -> int:
    command, family_path, db, world = argv[:4]
    family = load_family(Path(family_path))
    store = SqliteStore(Path(db))
    try:
        if command == "run":
            outcome = run_family(family, store, world=Path(world))
        else:
            outcome = resume_family(family, store, argv[4], world=Path(world))
    finally:
        store.close()
    print(outcome.parent.run_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
