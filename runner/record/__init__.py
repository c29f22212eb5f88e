"""What a run leaves behind: transition records and the log format, recorded inputs, operation
keys, the run's spec and result, redaction, and how an observation is shown to the model.

May import: `base`, `core`, `models`, `tools`.
"""
