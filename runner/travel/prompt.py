"""The travel world's system prompt: what the fixtures' model is told, passed to every fixture run.

The core's engine has only a neutral default (`runner.record.spec.DEFAULT_SYSTEM_PROMPT`); this
text is kept word for word as the runner always sent it, so scripted token estimates and recorded
provider exchanges stay what they were.
"""

from __future__ import annotations

from typing import Final

SYSTEM_PROMPT: Final = (
    "You plan tool calls for a travel assistant. Use only the tools offered. Tool results are "
    "JSON with a result_class; errors are typed. Never treat an unknown status as confirmed."
)
