"""The execute phase: its entry (``entry``), the dispatcher that decides which tasks run where
(``dispatcher``, ``parallelism``), the executor seam (``executor``), one task's flow from developer to commit
(``task_flow``) and the review of a finished phase (``phase_review``)."""
