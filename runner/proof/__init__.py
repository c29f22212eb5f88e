"""What the record proves: exact and counterfactual replay, grading, and the store-reading API
(`runner.proof.api`).

May import: `base`, `core`, `models`, `tools`, `record`, `store`, `engine`.
"""
