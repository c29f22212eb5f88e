"""`make bench-peers`: the runner beside Burr, LangGraph, pydantic-ai and a hand-written floor.

Every system runs the same 20-step workload (a scripted model asking for the benchmark's no-op
lookup with ten typed arguments, then answering), in its own process, the processes alternating
over several rounds so that drift in the machine's speed hits every system alike. Each system is
driven through its own public API as its documentation shows; see each module.
"""
