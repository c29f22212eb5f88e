"""Model adapters: the protocol, a fixture-scripted double, and (later) one module per provider."""
