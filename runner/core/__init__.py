"""Pure rules: the seven states and the transition table (the only importer of `transitions`),
the statuses of a write's operation, typed observations, the one decision function, the policy
(and a stored run's, read back), budgets, evidence and confirm tokens. No clock reading, store,
network or file. Simulation policies that prove the checks live in `sim/`.

May import: `base`.
"""
