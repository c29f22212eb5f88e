"""Runs distributed over many worker processes through procrastinate, a maintained
PostgreSQL-backed task queue, on the PostgreSQL store (runner/store/postgres.py).

`queue.py`: the queue (one task, one queue), its schema, and submitting runs. `worker.py`: what a
worker does with a queued run (take its lease, start or resume it, renew the lease while driving
it), and the stalled-job sweep that hands a dead worker's runs to the living. Needs the `postgres`
extra; the command line (`submit`, `worker`) and the queued service (`service/queued.py`) use
it.

A face: it may import every layer (today `base`, `record`, `store`, `engine`); what a worker
plays is handed to it by the command line, so it names no world.
"""
