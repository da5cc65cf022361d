"""The delegation policy: write scopes the user grants, and the pure decision made before every delegation.

Nothing here touches the repository's state or starts a process (``ground_scope`` only reads the tree),
so everything can be replayed offline. The orchestrator's ``RunPolicy`` connects it to the ledger.
"""
