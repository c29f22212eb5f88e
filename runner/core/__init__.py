"""Pure rules: the seven states and the transition table (the only importer of `transitions`),
typed observations, classification, the one decision function, the policy, budgets, evidence
and confirm tokens. No clock reading, store, network or file.

May import: `base`.
"""
