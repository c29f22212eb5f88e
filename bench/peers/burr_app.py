"""Apache Burr: a prebuilt graph (plan -> act -> plan ... -> answer), state persisted per step.

The graph is built once (`GraphBuilder`) and each run is an `Application` over it, run with
`app.run(halt_after=["answer"])`. Durable: Burr's `SQLitePersister`, its connection switched to
WAL and synchronous=NORMAL; Burr saves the whole state after every action (one commit each).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from burr.core import ApplicationBuilder, GraphBuilder, State, action, default, when
from burr.core.persistence import SQLitePersister

from .common import noop_lookup, replies

SCRIPT = replies()


@action(reads=["step", "messages"], writes=["messages", "call", "final"])
def plan(state: State) -> State:
    arguments = SCRIPT[state["step"]]
    reply: dict[str, Any] = (
        {"role": "assistant", "text": "done"}
        if arguments is None
        else {"role": "assistant", "call": {"name": "noop_lookup", "args": arguments}}
    )
    # `update` with a new list, not `state.append`: append deep-copies the whole history on every
    # call (quadratic in the transcript), which would put Burr far behind for no good reason.
    messages = [*state["messages"], reply]
    return state.update(messages=messages, call=arguments, final=arguments is None)


@action(reads=["call", "step"], writes=["messages", "step"])
def act(state: State) -> State:
    result = noop_lookup(state["call"])
    messages = [*state["messages"], {"role": "tool", "content": result}]
    return state.update(messages=messages, step=state["step"] + 1)


@action(reads=["messages"], writes=["answer"])
def answer(state: State) -> State:
    return state.update(answer=state["messages"][-1]["text"])


GRAPH = (
    GraphBuilder()
    .with_actions(plan=plan, act=act, answer=answer)
    .with_transitions(
        ("plan", "answer", when(final=True)),
        ("plan", "act", default),
        ("act", "plan", default),
    )
    .build()
)


def make(durability: str | None, folder: Path) -> Callable[[], None]:
    persister: SQLitePersister | None = None
    if durability is not None:
        connection = sqlite3.connect(folder / "burr.sqlite", check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        persister = SQLitePersister(str(folder / "burr.sqlite"), connection=connection)
        persister.initialize()
    runs = iter(range(10**9))

    def one_run() -> None:
        builder = (
            ApplicationBuilder()
            .with_graph(GRAPH)
            .with_state(messages=[], step=0, call=None, final=False)
            .with_entrypoint("plan")
            .with_identifiers(app_id=f"run-{next(runs)}")
        )
        if persister is not None:
            builder = builder.with_state_persister(persister)
        app = builder.build()
        _, _, state = app.run(halt_after=["answer"])
        assert state["answer"] == "done"

    return one_run
