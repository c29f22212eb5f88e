"""LangGraph: a minimal graph (agent -> tools -> agent ... -> END) compiled once.

Each run is `graph.invoke(...)` on its own thread id. Durable: `SqliteSaver` (which sets WAL
itself) on a connection switched to synchronous=NORMAL, with `durability="sync"` so every
checkpoint is written before the next step starts.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from .common import noop_lookup, replies

SCRIPT = replies()


class AgentState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    step: int


def agent(state: AgentState) -> dict[str, Any]:
    arguments = SCRIPT[state["step"]]
    if arguments is None:
        return {"messages": [{"role": "assistant", "text": "done"}]}
    call = {"name": "noop_lookup", "args": arguments}
    return {"messages": [{"role": "assistant", "call": call}]}


def tools(state: AgentState) -> dict[str, Any]:
    result = noop_lookup(state["messages"][-1]["call"]["args"])
    return {"messages": [{"role": "tool", "content": result}], "step": state["step"] + 1}


def route(state: AgentState) -> str:
    return "tools" if "call" in state["messages"][-1] else END


def _graph() -> StateGraph[AgentState]:
    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph


def make(durability: str | None, folder: Path) -> Callable[[], None]:
    if durability is None:
        compiled = _graph().compile()
    else:
        connection = sqlite3.connect(folder / "langgraph.sqlite", check_same_thread=False)
        connection.execute("PRAGMA synchronous=NORMAL")
        saver = SqliteSaver(connection)
        saver.setup()  # WAL
        compiled = _graph().compile(checkpointer=saver)
    runs = iter(range(10**9))

    def one_run() -> None:
        config = {"configurable": {"thread_id": f"run-{next(runs)}"}, "recursion_limit": 100}
        # Without a checkpointer there is nothing to persist (and no durability to ask for).
        options = {} if durability is None else {"durability": "sync"}
        state = compiled.invoke({"messages": [], "step": 0}, config, **options)
        assert state["messages"][-1]["text"] == "done"

    return one_run
