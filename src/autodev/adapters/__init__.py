"""Platform adapters: one ``AgentInvocation`` in, one ``AgentResult`` out, for each agent CLI.

The contract and the adapters arrive with the adapters work (issue 3); the package exists now so the
layout matches the architecture and nothing else claims the name.
"""
