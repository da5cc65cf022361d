"""Git as the evidence of what changed, and where a task's work lives: the repository (``git``), worktrees
one per task (``worktree``) or recycled in a pool (``worktree_pool``) behind one ``WorkspaceProvider``, the
setup that makes a worktree a working copy the project's tests accept (``worktree_setup``), and how a task's
commit reaches the branch (``integration``). It needs only a ``GitRepo`` and paths: nothing of a run."""
