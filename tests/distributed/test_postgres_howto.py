"""The PostgreSQL how-to page's blocks, run as a stranger would paste them: every line but the one
starting a server (a test cluster stands in) and the install (this checkout is it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from tests.support.paths import FIXTURES, ROOT
from tests.support.pg import Cluster


def _block() -> list[str]:
    text = (ROOT / "docs" / "how-to" / "postgres-and-workers.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert len(blocks) >= 2, "the page installs, then starts a database, a worker and runs"
    return [line for block in blocks[:2] for line in block.splitlines() if line.strip()]


def test_the_install_line_installs_this_project_not_the_other_runner_on_pypi() -> None:
    """`runner` on PyPI is an unrelated project (1.1, 2013, "Simple command runner"): the line a
    stranger pastes names this one's distribution, `runner-fsm`."""
    [install] = [line for line in _block() if line.startswith("pip install")]
    assert install.split("#")[0].split()[2] == "'runner-fsm[postgres]'", install


def test_the_readme_block_queues_runs_that_a_worker_ends(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    url = pg_cluster.new_database()
    lines = [
        f"export RUNNER_DB={url}" if line.startswith("export RUNNER_DB=") else line
        for line in _block()
        if not line.startswith(("docker ", "pip install"))
    ]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("RUNNER_DB", None)
    done = subprocess.run(
        ["bash", "-e", "-c", "\n".join([*lines, "wait"])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ids = [line for line in done.stdout.splitlines() if re.fullmatch(r"[0-9a-f-]{36}", line)]
    assert len(ids) == 5 * len(list(FIXTURES.glob("*.yaml")))
    assert "Traceback" not in done.stderr, done.stderr
    deadline = time.monotonic() + 120  # the worker stopped (SIGTERM): what it left, it handed back
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(
                "SELECT status, count(*) FROM procrastinate_jobs GROUP BY status"
            ).fetchall()
            if "doing" not in dict(rows):
                break
            time.sleep(0.5)
        assert "doing" not in dict(rows), rows
        ended = conn.execute(
            "SELECT count(*) FROM runner_runs WHERE summary IS NOT NULL"
        ).fetchone()
        running = conn.execute("SELECT count(*) FROM runner_runs WHERE summary IS NULL").fetchone()
    assert ended is not None and ended[0] > 0 and running == (0,)
    assert (tmp_path / "runner-world").is_dir()  # $RUNNER_WORLD, as the block sets it
