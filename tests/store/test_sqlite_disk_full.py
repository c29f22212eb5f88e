"""A disk that fills up mid-run: a clear `StoreError`, nothing half-written, the run resumable.

`PRAGMA max_page_count` makes SQLite itself answer SQLITE_FULL once the file would grow past the
limit, exactly as on a full disk. Sweeping the limit page by page stops the run at every write it
makes; each stopped run is then resumed with room to spare and must end as declared.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runner.base.errors import StoreError
from runner.harness.fixtures import load_fixture
from runner.store import SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import resume_fixture, run_fixture
from tests.support.paths import FIXTURES

pytestmark = pytest.mark.slow

MAX_EXTRA_PAGES = 200


def _small_pages(db: Path) -> None:
    """A new file with 512-byte pages: most writes of a run then need a page of their own."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA page_size=512")
    conn.execute("CREATE TABLE fix_the_page_size (x)")
    conn.execute("DROP TABLE fix_the_page_size")
    conn.close()


@pytest.mark.parametrize("name", ["hold_timeout_after_commit"])
def test_a_full_disk_stops_the_run_cleanly_and_it_resumes(
    name: str, tmp_path: Path, contracts: ContractSet
) -> None:
    fixture = load_fixture(FIXTURES / f"{name}.yaml", contracts)
    assert fixture.expect is not None
    stopped = 0
    for extra in range(MAX_EXTRA_PAGES):
        folder = tmp_path / str(extra)
        folder.mkdir()
        db = folder / "runs.sqlite"
        _small_pages(db)
        store = SqliteStore(db)
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count={pages + extra}")
        try:
            run_fixture(fixture, contracts, store, world_dir=folder / "world")
        except StoreError as exc:
            assert "disk or database full" in str(exc) and str(db) in str(exc)
            stopped += 1
        else:
            break  # room enough for the whole run: every earlier limit stopped it somewhere
        finally:
            store.close()
        store = SqliteStore(db)  # space again: a fresh connection has no page limit
        try:
            runs = store.runs()
            if not runs:  # stopped before the run began: nothing may have happened
                continue
            assert len(runs) == 1 and runs[0].summary is None
            outcome = resume_fixture(runs[0].header.run_id, contracts, store)
            records = store.transitions(outcome.result.run_id)
        finally:
            store.close()
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        assert outcome.result.terminal == fixture.expect.terminal, (extra, outcome.failures)
        assert outcome.holds == fixture.expect.holds, extra
    else:
        pytest.fail(f"the run never fit in {MAX_EXTRA_PAGES} extra pages")
    assert stopped >= 2  # the limit really stopped the run, at more than one place
