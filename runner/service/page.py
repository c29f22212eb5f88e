"""The run inspector page at `GET /`: one static document, no build step, no outside assets.

It keeps the API key in the browser's session storage and calls the same API as any client: the
tenant's runs, one run's state diagram (the machine's own edge table, the run's edges marked) and
its transition timeline, filled in live from the events stream (read with `fetch`, which can send
the key, and resumed with `Last-Event-ID` after a drop), where a waiting run's continuation stands
(polled until it ends), and the pending approvals with approve and deny buttons. Every id it puts
into a request path (from the address's `#run/...`, a listed run, an approval, a continuation) is
checked against the service's id shapes and percent-encoded, so no link can turn a button into a
request to another endpoint; a link naming no run shows "no such run" with no cancel.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Final

from ..core.machine import TABLE
from ..core.states import TERMINAL, State

_POSITIONS: Final = {
    State.PLAN: (90, 60),
    State.CALL: (290, 60),
    State.OBSERVE: (490, 60),
    State.COMPLETE: (60, 200),
    State.ABSTAIN: (220, 200),
    State.ESCALATE: (380, 200),
    State.UNKNOWN: (540, 200),
}


def state_diagram_svg() -> str:
    """The seven states and every edge of the machine's table, as SVG (ids for the page)."""
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 620 250" id="machine">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>',
    ]
    for source, dest in sorted({(e.source, e.dest) for e in TABLE}):
        (x1, y1), (x2, y2) = _POSITIONS[source], _POSITIONS[dest]
        ident = f"edge-{source.value}-{dest.value}"
        if source == dest:
            path = (
                f"M{x1 - 15},{y1 - 22} C{x1 - 40},{y1 - 70} {x1 + 40},{y1 - 70} {x1 + 15},{y1 - 22}"
            )
        else:
            bend = 25 if (dest, source) in {(e.source, e.dest) for e in TABLE} else 0
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2 - bend * (1 if x2 > x1 else -1)
            path = f"M{x1},{y1} Q{mx},{my} {x2},{y2}"
        parts.append(
            f'<path id="{ident}" class="edge" d="{path}" fill="none" marker-end="url(#arrow)"/>'
        )
    for state, (x, y) in _POSITIONS.items():
        kind = "terminal" if state in TERMINAL else "loop"
        parts.append(
            f'<g id="state-{state.value}" class="state {kind}"><ellipse cx="{x}" cy="{y}" '
            f'rx="52" ry="22"/><text x="{x}" y="{y + 5}" text-anchor="middle">{state.value}'
            "</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


@cache
def page_html() -> str:
    """The page (runner/service/page.html) with the machine's diagram in place."""
    text = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
    return text.replace("<!--DIAGRAM-->", state_diagram_svg())
