"""Where the checkout's files are, wherever a test module sits in `tests/`."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
"""The checkout."""
FIXTURES = ROOT / "fixtures"
"""The bundled travel fixtures."""
DATA = ROOT / "tests" / "data"
"""The tests' own data: stored logs, recorded provider exchanges, catalogues, child scenarios."""
