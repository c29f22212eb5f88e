"""`import runner` is cheap: what the command line, YAML, OpenTelemetry, the provider SDKs,
structlog and jsonschema's reference validator need is imported only when used (issue 11).

Checked in a fresh interpreter by what lands in `sys.modules`, never by time (times drift with the
machine): after `import runner`, after importing every public name, and after a whole run through
the public API with the library's default settings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = ROOT / "examples" / "contracts"

NEVER_FOR_A_RUN = (
    "runner.cli",
    "runner.travel",
    "runner.models.openai",
    "runner.models.anthropic",
    "yaml",
    "structlog",
    "opentelemetry",
    "openai",
    "anthropic",
    "httpx",
)
"""Modules no run with the default settings needs (a prefix stands for its submodules)."""

NOT_AT_IMPORT = (*NEVER_FOR_A_RUN, "jsonschema", "referencing", "importlib.metadata")
"""Nor does importing the public API: the reference validator is built when contracts load, and
pydantic's validators (whose first one loads `importlib.metadata`) when they are first used."""


def _loaded_after(code: str) -> list[str]:
    """The modules loaded in a fresh interpreter once `code` has run (sorted)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def _heavy(loaded: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == n or m.startswith(n + ".") for n in names)]


def test_import_runner_loads_none_of_the_heavy_modules() -> None:
    loaded = _loaded_after("import runner")
    assert _heavy(loaded, (*NOT_AT_IMPORT, "pydantic", "runner.engine")) == []


def test_the_whole_public_api_imports_without_them() -> None:
    loaded = _loaded_after("from runner import *\nimport runner.api")
    assert "runner.engine" in loaded  # the probe did import the engine
    assert _heavy(loaded, NOT_AT_IMPORT) == []


RUN = f"""
import asyncio
from pathlib import Path
from runner import (
    Engine, MemoryStore, Principal, RunSpec, SystemClock, ToolResponse, load_contracts,
)
from runner.models.scripted import ScriptedModel, ScriptedTurn

class Desk:
    def implementation(self, tool):
        async def lookup(invocation):
            return ToolResponse(payload={{
                "status": "ok", "order_id": "A-100", "state": "delivered", "amount_cents": 1,
            }})
        return lookup if tool == "lookup_order" else None

contracts = load_contracts(Path({str(CONTRACTS)!r}))
engine = Engine(contracts=contracts, toolbox=Desk(), store=MemoryStore(), clock=SystemClock())
spec = RunSpec(
    task="where is A-100", tenant="t", tools=("lookup_order",),
    principal=Principal(id="p", scopes=frozenset({{"orders.read"}})),
)
model = ScriptedModel([ScriptedTurn.model_validate(turn) for turn in (
    {{"tool_calls": [{{"name": "lookup_order", "args": {{"order_id": "A-100"}}, "id": "c1"}}]}},
    {{"final": "delivered"}},
)])
result = asyncio.run(engine.run(spec, model))
assert result.terminal.value == "complete", result
"""


def test_a_run_with_default_settings_loads_none_of_them() -> None:
    loaded = _loaded_after(RUN)
    assert "jsonschema" in loaded  # contracts loaded: the reference validator is built
    assert _heavy(loaded, NEVER_FOR_A_RUN) == []
