"""The context report's "without truncation" figure is what truncation saved: with nothing
truncated it equals the cumulative prefill and `show` does not claim a saving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main

from .conftest import FIXTURES


def test_nothing_truncated_means_no_claimed_saving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """read_only_success truncates nothing, yet each step counted one estimated token of elided
    text (the estimate of 0 characters was 1), so `show` said the prefill "would be" 2 more."""
    db = str(tmp_path / "r.sqlite")
    assert main(["run", str(FIXTURES / "read_only_success.yaml"), "--db", db, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    context = run["context"]
    assert context["cumulative_prefill_without_truncation"] == context["cumulative_prefill"]
    assert main(["show", run["run_id"], "--db", db]) == 0
    assert "without truncation" not in capsys.readouterr().out
