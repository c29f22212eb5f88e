"""What the record proves: exact and counterfactual replay, grading, the store-reading API
(`runner.proof.api`), and how a run is shown (`report.py`: its lines and its JSON, for the CLI
and the service).

May import: `base`, `core`, `models`, `tools`, `record`, `store`, `engine`.
"""
