"""The travel world as the harness sees it (`runner.harness.world.World`): the travel prompt,
the suppliers' credential, and each run's place, a simulated supplier database its holds go to.

A fixture that offers neither supplier tool (`hold_room`, `lookup_hold`) gets no database: its
place is empty, records nothing and counts no holds.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..base.clock import Clock
from ..base.errors import ResumeRefused
from ..harness.fixtures import Fixture
from .bundled import fixtures_dir
from .environment import HoldRoom, LookupHold, ScriptedEnvironment
from .prompt import SYSTEM_PROMPT
from .supplier import SupplierDatabase, has_schema, locate, recorded_holds

if TYPE_CHECKING:
    from ..harness.world import World

SUPPLIER_TOOLS: Final = frozenset({HoldRoom.name, LookupHold.name})


@dataclass(frozen=True, slots=True)
class SupplierStage:
    """One run's place in the travel world: its supplier database (None: it has none)."""

    supplier: SupplierDatabase | None

    def toolbox(
        self, fixture: Fixture, clock: Clock, consumed: Mapping[str, int]
    ) -> ScriptedEnvironment:
        return ScriptedEnvironment(
            fixture.environment, fixture.tools, clock, self.supplier, consumed
        )

    def holds(self) -> int | None:
        return self.supplier.active_holds() if self.supplier is not None else None

    def close(self) -> None:
        if self.supplier is not None:
            self.supplier.close()


class TravelWorld:
    """The fixtures' travel world (`TRAVEL`), which the command line and the service run in."""

    system_prompt: Final = SYSTEM_PROMPT

    def fixtures_dir(self) -> Path:
        return fixtures_dir()

    def credentials(self, fixture: Fixture) -> dict[str, str]:
        """The runtime's credential for the simulated suppliers; never shown to the model."""
        return {"supplier_token": f"sim-{fixture.tenant}"}

    def stage(
        self, fixture: Fixture, world_dir: Path | None
    ) -> tuple[SupplierStage, dict[str, Any]]:
        if not SUPPLIER_TOOLS & set(fixture.tools):
            return SupplierStage(None), {}
        # Absolute: a resume from another working directory must find this very database.
        folder = (world_dir or Path(tempfile.mkdtemp(prefix="runner-world-"))).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        supplier = SupplierDatabase(folder / f"supplier-{uuid.uuid4().hex[:12]}.sqlite")
        return SupplierStage(supplier), {"supplier_db": str(supplier.path)}

    def restage(
        self, run_id: str, recorded: Mapping[str, Any], store_dir: Path | None
    ) -> SupplierStage:
        """The run's own supplier database; a missing one is refused, never created empty."""
        path_recorded = recorded.get("supplier_db")
        if not path_recorded:
            return SupplierStage(None)
        path = locate(path_recorded, store_dir)
        if path is None:
            raise ResumeRefused(run_id, f"its supplier database {path_recorded} does not exist")
        if not has_schema(path):
            raise ResumeRefused(run_id, f"its supplier database {path} is empty (no schema)")
        return SupplierStage(SupplierDatabase.open_existing(path))

    def recorded_holds(
        self, recorded: Mapping[str, Any], store_dir: Path | None, *, must_exist: bool = False
    ) -> int | None:
        return recorded_holds(recorded.get("supplier_db"), store_dir, must_exist=must_exist)


TRAVEL: Final[World] = TravelWorld()  # typed as the protocol: checked to implement it
"""The travel world: what the command line and the service are wired to by default."""
