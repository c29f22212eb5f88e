"""The base layer: errors, the clock, logging, tracing spans and small helpers (plain JSON,
defensive document reading, crash injection) that every other layer may use.

May import: nothing of the runner.
"""
