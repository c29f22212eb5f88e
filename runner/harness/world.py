"""The world protocol: what a fixture world gives the harness to play a fixture's tools in.

The harness drives runs (`scenario.py`) and checks fixtures (`checks.py`) for any world; a world
(the travel demo, `runner.travel`, is one) says what the model is told, which credentials the
runtime holds for its tools, and opens, for each run, the simulated place its tools act on (a
supplier database, say). A stored run keeps where that place is in its header (`recorded`), so a
resume or a continuation elsewhere reopens the very same one, or is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..base.clock import Clock
    from ..tools.invocation import ToolImplementation
    from .fixtures import Fixture


class ScriptedTools(Protocol):
    """The tools one run is given: a `ToolBox` whose tools play the fixture's script."""

    @property
    def tools(self) -> Mapping[str, Any]:
        """Each tool by name (a test reads what it was called with)."""
        ...

    def implementation(self, tool: str) -> ToolImplementation | None: ...


class Stage(Protocol):
    """One run's simulated place, open from the run's start to its end (then `close`d)."""

    def toolbox(self, fixture: Fixture, clock: Clock, consumed: Mapping[str, int]) -> ScriptedTools:
        """The run's tools on `clock`, `consumed` outcomes of each already played."""
        ...

    def holds(self) -> int | None:
        """What the run left behind that `expect.holds` counts (None: nothing to count)."""
        ...

    def close(self) -> None: ...


class World(Protocol):
    """A fixture world: its prompt, its tools' credentials and the place each run acts on."""

    @property
    def system_prompt(self) -> str:
        """What the model of every run in this world is told."""
        ...

    def fixtures_dir(self) -> Path:
        """The world's bundled fixtures."""
        ...

    def credentials(self, fixture: Fixture) -> dict[str, str]:
        """The runtime's credentials for the world's tools; never shown to the model."""
        ...

    def stage(self, fixture: Fixture, world_dir: Path | None) -> tuple[Stage, dict[str, Any]]:
        """A fresh place for a run of `fixture` (under `world_dir`, if it needs files), and what
        the run's header keeps to reopen it (plain JSON)."""
        ...

    def restage(self, run_id: str, recorded: Mapping[str, Any], store_dir: Path | None) -> Stage:
        """The place a stored run recorded, reopened to go on (`store_dir` anchors paths older
        runners recorded relatively); raises `ResumeRefused` when it is gone."""
        ...

    def recorded_holds(
        self, recorded: Mapping[str, Any], store_dir: Path | None, *, must_exist: bool = False
    ) -> int | None:
        """`Stage.holds` of a stored run's place, read without writing; None when it has none or
        (unless `must_exist`: `StoreError`) it is nowhere to be found."""
        ...
